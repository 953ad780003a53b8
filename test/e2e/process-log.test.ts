import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startServer, waitUntilLive } from '../helpers/server-process.js';

// What a real server process writes to its log (LOG_LEVEL=info): the request id and the caller's trace id on
// each request's lines, and never a token, secret, password or cookie.
describe('the server process log', () => {
  it('carries the request id and the W3C trace id, and no credential of any kind', async () => {
    const server = await startServer({ LOG_LEVEL: 'info' });
    await waitUntilLive(server);
    const { client_id: clientId, client_secret: secret } = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'bootstrap.json'), 'utf8')).clients.admin;
    const { password, email } = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'bootstrap.json'), 'utf8')).admin;
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const traceparent = `00-${traceId}-00f067aa0ba902b7-01`;

    const issued = await fetch(`${server.base}/oauth/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded', traceparent },
      body: 'grant_type=client_credentials',
    });
    expect(issued.status).toBe(200);
    const token = ((await issued.json()) as { access_token: string }).access_token;
    const read = await fetch(`${server.base}/v1/authorization`, { headers: { authorization: `Bearer ${token}`, traceparent, cookie: 'portcullis_session=cookie-value-secret' } });
    expect(read.status).toBe(200);
    const requestId = read.headers.get('x-request-id')!;
    // A token in the query string is refused, and masked in the logged URL.
    expect((await fetch(`${server.base}/v1/posts?access_token=${token}`)).status).toBe(400);
    // A password posted to the sign-in form (a form that then fails its CSRF check).
    await fetch(`${server.base}/oauth/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `email=${encodeURIComponent(email)}&password=${encodeURIComponent(password)}` });

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    const lines = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const ofRequest = lines.filter((line) => line.reqId === requestId);
    expect(ofRequest.length).toBeGreaterThanOrEqual(2);
    for (const line of ofRequest) expect(line.traceId).toBe(traceId);
    // Requests without a traceparent have no trace id.
    expect(lines.filter((line) => typeof line.reqId === 'string' && line.reqId !== requestId && line.traceId !== undefined && line.traceId !== traceId)).toEqual([]);

    const log = server.output();
    for (const credential of [token, secret, password, 'cookie-value-secret', Buffer.from(`${clientId}:${secret}`).toString('base64')]) {
      expect(log.includes(credential), `the log holds a credential (${credential.slice(0, 6)}...)`).toBe(false);
    }
  });
});
