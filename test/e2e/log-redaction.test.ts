import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/logging/redact-url.js';
import { startServer, waitUntilLive } from '../helpers/server-process.js';

// Credentials sent where they do not belong are refused — and must not survive in the log or the audit
// table either, where more people read them than the database.

describe('credentials in logs and audit records', () => {
  it('masks credential-like query parameters, whatever their case or encoding, and nothing else', () => {
    expect(redactUrl('/v1/posts?limit=5&access_token=abc&Client_Secret=s3&ACCESS%5FTOKEN=x&code=c&status=draft')).toBe(
      '/v1/posts?limit=5&access_token=[REDACTED]&Client_Secret=[REDACTED]&ACCESS%5FTOKEN=[REDACTED]&code=[REDACTED]&status=draft',
    );
    expect(redactUrl('/v1/posts')).toBe('/v1/posts');
    expect(redactUrl('/v1/posts?bearer=S1&jwt=S2&pwd=S3&pass=S4&limit=2')).toBe('/v1/posts?bearer=[REDACTED]&jwt=[REDACTED]&pwd=[REDACTED]&pass=[REDACTED]&limit=2');
    expect(redactUrl('http://user:S6@host/v1/rest?limit=1')).toBe('http://[REDACTED]@host/v1/rest?limit=1');
    expect(redactUrl('/v1/posts?password')).toBe('/v1/posts?password=[REDACTED]');
    // Names bent so that an exact comparison would miss them, and separators other than one ? and &.
    expect(redactUrl('/v1/posts??access_token=S1')).toBe('/v1/posts??access_token=[REDACTED]');
    expect(redactUrl('/v1/posts?x=1&access_token%20=S2&Access-Token=S3')).toBe('/v1/posts?x=1&access_token%20=[REDACTED]&Access-Token=[REDACTED]');
    expect(redactUrl('/v1/posts?access_token%00=S4')).toBe('/v1/posts?access_token%00=[REDACTED]');
    expect(redactUrl('/v1/posts;access_token=S5?limit=2')).toBe('/v1/posts;access_token=[REDACTED]?limit=2');
    expect(redactUrl('/v1/audit-events?since=2026-01-01T00:00:00Z&decision=deny&limit=5')).toBe('/v1/audit-events?since=2026-01-01T00:00:00Z&decision=deny&limit=5');
  });

  it('a server process logs neither a token or secret in the URL nor a secret sent as a Basic client_id', async () => {
    const server = await startServer({ LOG_LEVEL: 'info' });
    await waitUntilLive(server);
    const leaks = ['LEAKED-ACCESS-TOKEN-0123456789', 'LEAKED-CLIENT-SECRET-0123456789', 'LEAKED-PASSWORD-0123456789', 'SWAPPED-SECRET-0123456789abcdef'];

    const inUrl = await fetch(`${server.base}/v1/posts?access_token=${leaks[0]}`);
    expect(inUrl.status).toBe(400);
    const inQuery = await fetch(`${server.base}/v1/rest?client_secret=${leaks[1]}&Password=${leaks[2]}`);
    expect(inQuery.status).toBe(400);
    // Secret and client_id swapped: the "client_id" the server is shown is the secret.
    const swapped = await fetch(`${server.base}/oauth/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${leaks[3]}:portcullis-admin`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials',
    });
    expect(swapped.status).toBe(401);

    // The audit batch is written within 250 ms, the log asynchronously; SIGTERM flushes both.
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    const log = server.output();
    for (const leak of leaks) expect(log).not.toContain(leak);
    expect(log).toContain('access_token=[REDACTED]');
    expect(log).toContain('client_secret=[REDACTED]&Password=[REDACTED]');

    const db = new Database(path.join(server.dataDir, 'portcullis.db'), { readonly: true });
    const rows = db.prepare("select * from audit_events where interface = 'oauth'").all() as Record<string, unknown>[];
    db.close();
    expect(JSON.stringify(rows)).not.toContain(leaks[3]);
    expect(rows.map((row) => ({ clientId: row.client_id, decision: row.decision, reason: row.reason }))).toEqual([
      { clientId: null, decision: 'deny', reason: 'authentication' },
    ]);
  });
});
