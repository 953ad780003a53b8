import net from 'node:net';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { allowAuditWrites, refuseAuditWrites } from '../helpers/audit.js';
import { ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET, startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

// While the audit events of answered requests cannot be written, they wait in memory up to AUDIT_MAX_PENDING;
// at that bound the server refuses new requests with 503 UNAVAILABLE and Retry-After, each interface in its
// own error shape, and runs nothing for them, so no event of a request it answered is ever dropped.

const MAX_PENDING = 10;
const REFUSAL = 'The audit log cannot be written at the moment; retry.';

describe.each(DATABASE_KINDS)('a full audit log on %s', (kind) => {
  let t: TestApp | undefined;

  let client: Client | undefined;

  afterEach(async () => {
    await client?.dispose();
    client = undefined;
    await t?.close();
    t = undefined;
  });

  /** Answered requests until the first refusal; each records one event. */
  async function fill(token: string) {
    const served: string[] = [];
    let refused = await t!.request({ url: '/v1/authorization', token });
    for (let i = 0; i < 3 * MAX_PENDING && refused.statusCode === 200; i++) {
      served.push(refused.headers['x-request-id'] as string);
      refused = await t!.request({ url: '/v1/authorization', token });
    }
    return { served, refused };
  }

  it('refuses requests with 503 until its events are written, then serves again, having lost none', async () => {
    t = await startTestApp(kind, { AUDIT_MAX_PENDING: String(MAX_PENDING) });
    const token = await t.adminClientToken();
    await t.app.audit.flush();
    await refuseAuditWrites(t.database.db.kysely, kind);

    const { served, refused } = await fill(token);
    // One event per answered request: exactly the bound's worth were admitted.
    expect(served.length).toBe(MAX_PENDING);
    expect(t.app.audit.pendingCount).toBe(MAX_PENDING);
    expect({ status: refused.statusCode, retryAfter: refused.headers['retry-after'], body: refused.json() }).toEqual({
      status: 503,
      retryAfter: '2',
      body: { error: { code: 'UNAVAILABLE', message: REFUSAL } },
    });

    // Nothing runs for a refused request: the post is not created.
    const write = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'Refused', body: '', status: 'draft' } });
    expect({ status: write.statusCode, body: write.json() }).toEqual({ status: 503, body: { error: { code: 'UNAVAILABLE', message: REFUSAL } } });
    expect(await t.database.db.kysely.selectFrom('posts').select('id').execute()).toEqual([]);

    const graphql = await t.request({ method: 'POST', url: '/graphql', token, body: { query: '{ posts(first: 1) { nodes { id } } }' } });
    expect({ status: graphql.statusCode, retryAfter: graphql.headers['retry-after'], body: graphql.json() }).toEqual({
      status: 503,
      retryAfter: '2',
      body: { errors: [{ message: REFUSAL, extensions: { code: 'UNAVAILABLE' } }] },
    });
    const tokenRequest = await t.app.fastify.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${ADMIN_CLIENT_ID}:${ADMIN_CLIENT_SECRET}`).toString('base64')}`,
      },
      payload: 'grant_type=client_credentials',
    });
    expect({ status: tokenRequest.statusCode, retryAfter: tokenRequest.headers['retry-after'], cache: tokenRequest.headers['cache-control'], body: tokenRequest.json() }).toEqual({
      status: 503,
      retryAfter: '2',
      cache: 'no-store',
      body: { error: 'temporarily_unavailable', error_description: REFUSAL },
    });

    // The probes still answer: alive, not ready.
    expect((await t.request({ url: '/healthz' })).statusCode).toBe(200);
    const notReady = await t.request({ url: '/readyz' });
    expect({ status: notReady.statusCode, body: notReady.json() }).toEqual({
      status: 503,
      body: { error: { code: 'UNAVAILABLE', message: 'The audit log cannot be written at the moment.' } },
    });
    // The refusals recorded nothing: the events waiting are those of the answered requests.
    expect(t.app.audit.pendingCount).toBe(MAX_PENDING);

    await allowAuditWrites(t.database.db.kysely, kind);
    await t.app.audit.flush();
    expect(t.app.audit.full).toBe(false);
    expect((await t.request({ url: '/readyz' })).statusCode).toBe(200);
    expect((await t.request({ url: '/v1/authorization', token })).statusCode).toBe(200);
    const stored = await t.database.db.kysely.selectFrom('auditEvents').select('requestId').where('requestId', 'in', served).execute();
    expect(stored.map((row) => row.requestId).sort()).toEqual([...served].sort());
  });

  it('starts no subscription on an open socket and opens no socket while it is full', async () => {
    t = await startTestApp(kind, { AUDIT_MAX_PENDING: String(MAX_PENDING) });
    const url = `${(await t.app.fastify.listen({ host: '127.0.0.1', port: 0 })).replace('http', 'ws')}/graphql`;
    const token = await (await t.createUser('member')).token();
    let connected!: () => void;
    const ready = new Promise<void>((resolve) => (connected = resolve));
    client = createClient({ url, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${token}` }, lazy: false, retryAttempts: 0, on: { connected } });
    await ready;
    await t.app.audit.flush();
    await refuseAuditWrites(t.database.db.kysely, kind);
    expect((await fill(token)).refused.statusCode).toBe(503);

    const ended = new Promise<unknown>((resolve) => {
      client!.subscribe({ query: 'subscription { postPublished { id } }' }, { next: () => {}, error: resolve, complete: () => resolve(null) });
    });
    expect(await ended).toEqual([{ message: REFUSAL, extensions: { code: 'UNAVAILABLE' } }]);
    // A new socket is refused over HTTP, and the server closes the connection it was asked to upgrade.
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk));
    const closed = new Promise<boolean>((resolve) => {
      socket.on('close', () => resolve(true));
      setTimeout(() => resolve(false), 3000);
    });
    socket.write(
      'GET /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
        `Sec-WebSocket-Key: ${Buffer.from('0123456789abcdef').toString('base64')}\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n`,
    );
    expect(await closed).toBe(true);
    expect(answer.split('\r\n', 1)[0]).toBe('HTTP/1.1 503 Service Unavailable');
    expect(answer.toLowerCase()).toContain('\r\nretry-after: 2\r\n');
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({ errors: [{ message: REFUSAL, extensions: { code: 'UNAVAILABLE' } }] });
    await allowAuditWrites(t.database.db.kysely, kind);
    await t.app.audit.flush();
    expect(t.app.audit.full).toBe(false);
  });
});
