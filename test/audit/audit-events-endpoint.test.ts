import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainHash } from '../../src/audit/chain.js';
import { verifyAuditChain } from '../../src/audit/verify-chain.js';
import { ADMIN_CLIENT_ID, startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

describe.each(DATABASE_KINDS)('GET /v1/audit-events on %s', (kind) => {
  let t: TestApp;
  let admin: string;
  let member: TestUser;
  let memberToken: string;
  let postId: string;

  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '10000', AUDIT_FAILURE_WINDOW: '1' });
    admin = await t.adminClientToken();
    member = await t.createUser('member');
    memberToken = await member.token();
    const other = await t.createUser('member');
    const draft = await t.request({ method: 'POST', url: '/v1/posts', token: await other.token(), body: { title: 'd', body: 'b', status: 'draft' } });
    postId = draft.json().id;
    await t.request({ url: `/v1/posts/${postId}`, token: memberToken }); // deny: resource
    await t.request({ url: '/v1/posts', token: await member.token(['read:users']) }); // deny: scope
    await t.request({ url: '/v1/posts', token: memberToken }); // allow
    await t.app.audit.flush();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('lists decisions with the check that decided, filtered by subject and decision', async () => {
    const res = await t.request({ url: `/v1/audit-events?subject=${member.id}&decision=deny`, token: admin });
    expect(res.statusCode).toBe(200);
    const { data, page } = res.json();
    expect(page).toEqual({ limit: 20, next: null });
    expect(data).toEqual([
      {
        id: expect.stringMatching(/^[0-9a-f]{32}$/),
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        requestId: expect.any(String),
        subject: member.id,
        clientId: 'portcullis-admin',
        interface: 'rest',
        operation: 'getPost',
        resourceType: 'post',
        resourceId: postId,
        decision: 'deny',
        reason: 'resource',
        count: null,
      sourceAddress: null,
      firstSeen: null,
      lastSeen: null,
      scopes: null,
      traceId: null,
      hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      },
      {
        id: expect.any(String),
        time: expect.any(String),
        requestId: expect.any(String),
        subject: member.id,
        clientId: 'portcullis-admin',
        interface: 'rest',
        operation: 'listPosts',
        resourceType: null,
        resourceId: null,
        decision: 'deny',
        reason: 'scope',
        count: null,
      sourceAddress: null,
      firstSeen: null,
      lastSeen: null,
      scopes: null,
      traceId: null,
      hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      },
    ]);
  });

  it('filters by operation, client and time, and pages with a cursor', async () => {
    const byOperation = (await t.request({ url: `/v1/audit-events?operation=listPosts&subject=${member.id}`, token: admin })).json();
    expect(byOperation.data.map((e: { reason: string }) => e.reason)).toEqual(['scope', 'granted']);
    const none = await t.request({ url: '/v1/audit-events?client=nobody', token: admin });
    expect(none.json()).toEqual({ data: [], page: { limit: 20, next: null } });
    const future = await t.request({ url: '/v1/audit-events?since=2999-01-01T00:00:00Z', token: admin });
    expect(future.json().data).toEqual([]);
    const past = await t.request({ url: '/v1/audit-events?until=2000-01-01T00:00:00%2B02:00', token: admin });
    expect(past.json().data).toEqual([]);
    const first = (await t.request({ url: `/v1/audit-events?subject=${member.id}&limit=2`, token: admin })).json();
    expect(first.data).toHaveLength(2);
    const second = (await t.request({ url: `/v1/audit-events?subject=${member.id}&limit=2&after=${first.page.next}`, token: admin })).json();
    expect(second.data.map((e: { operation: string }) => e.operation)).toEqual(['listPosts']);
    expect(second.page.next).toBeNull();
  });

  it('records the W3C trace id of a request whose caller sent a traceparent, covered by the chain', async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const traced = await t.request({ url: '/v1/posts', token: memberToken, headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` } });
    expect(traced.statusCode).toBe(200);
    const untraced = await t.request({ url: '/v1/posts', token: memberToken, headers: { traceparent: 'not-a-traceparent' } });
    await t.app.audit.flush();
    const events = (await t.request({ url: `/v1/audit-events?operation=listPosts&subject=${member.id}&limit=100`, token: admin })).json().data as { requestId: string; traceId: string | null }[];
    expect(events.find((e) => e.requestId === traced.headers['x-request-id'])?.traceId).toBe(traceId);
    expect(events.find((e) => e.requestId === untraced.headers['x-request-id'])?.traceId).toBeNull();
    expect(await verifyAuditChain(t.database.db.kysely)).toMatchObject({ ok: true });
    // The event's hash covers its trace id: another one would not match it.
    const row = await t.database.db.kysely.selectFrom('auditEvents').selectAll().where('traceId', '=', traceId).executeTakeFirstOrThrow();
    const { seq: _seq, prevHash, hash, ...fields } = row;
    expect(chainHash(prevHash!, fields)).toBe(hash);
    expect(chainHash(prevHash!, { ...fields, traceId: 'ffffffffffffffffffffffffffffffff' })).not.toBe(hash);
  });

  it('records the trace id of a write sent over a socket, whose body is read before the operation runs', async () => {
    // Over a real connection Node ends the request's own stream once its body is read, long before the
    // response and its audit event: the trace id must outlive that.
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    await t.app.fastify.listen({ host: '127.0.0.1', port: 0 });
    const { port } = t.app.fastify.server.address() as { port: number };
    const created = await fetch(`http://127.0.0.1:${port}/v1/posts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${memberToken}`, 'content-type': 'application/json', traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      body: JSON.stringify({ title: 'Traced', body: 'sent over a socket', status: 'draft' }),
    });
    expect(created.status).toBe(201);
    await t.app.audit.flush();
    const events = (await t.request({ url: `/v1/audit-events?operation=createPost&subject=${member.id}&limit=100`, token: admin })).json().data as { requestId: string; traceId: string | null }[];
    expect(events.find((e) => e.requestId === created.headers.get('x-request-id'))?.traceId).toBe(traceId);
  });

  it('lists the token endpoint\'s decisions too, as interface oauth', async () => {
    const attempt = await t.app.fastify.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${ADMIN_CLIENT_ID}:not-the-secret`).toString('base64')}`,
      },
      payload: 'grant_type=client_credentials',
    });
    expect(attempt.statusCode).toBe(401);
    // Refused credentials are counted per address and written when the (1 s) window closes.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    await t.app.audit.flush();
    const res = await t.request({ url: `/v1/audit-events?operation=token&client=${ADMIN_CLIENT_ID}`, token: admin });
    expect(res.statusCode).toBe(200);
    const events = res.json().data as { decision: string }[];
    // The admin token of beforeAll was issued here; the refusal above came after it.
    expect(events.at(0)).toEqual({
      id: expect.any(String),
      time: expect.any(String),
      requestId: expect.any(String),
      subject: ADMIN_CLIENT_ID,
      clientId: ADMIN_CLIENT_ID,
      interface: 'oauth',
      operation: 'token',
      resourceType: 'token',
      resourceId: expect.stringMatching(/^[0-9a-f]{32}$/),
      decision: 'allow',
      reason: 'granted',
      count: null,
      sourceAddress: null,
      firstSeen: null,
      lastSeen: null,
      scopes: expect.stringMatching(/^read:users /),
      traceId: null,
      hash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(events.at(-1)).toEqual({
      id: expect.any(String),
      time: expect.any(String),
      requestId: null,
      subject: null,
      clientId: ADMIN_CLIENT_ID,
      interface: 'oauth',
      operation: 'token',
      resourceType: null,
      resourceId: null,
      decision: 'deny',
      reason: 'authentication',
      count: 1,
      sourceAddress: '127.0.0.1',
      firstSeen: expect.any(String),
      lastSeen: expect.any(String),
      scopes: null,
      traceId: null,
      hash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
  });

  it('is for admins with read:audit only', async () => {
    const asMember = await t.request({ url: '/v1/audit-events', token: memberToken });
    expect(asMember.statusCode).toBe(403);
    expect(asMember.json()).toEqual({ error: { code: 'FORBIDDEN', message: 'Your role does not permit this action.' } });
    const withoutScope = await t.request({ url: '/v1/audit-events', token: await t.adminClientToken('read:posts') });
    expect(withoutScope.statusCode).toBe(403);
    expect(withoutScope.json().error.code).toBe('INSUFFICIENT_SCOPE');
    expect((await t.request({ url: '/v1/audit-events' })).statusCode).toBe(401);
  });

  it('has no operation that changes events', async () => {
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await t.request({ method, url: '/v1/audit-events', token: admin, body: {} });
      expect(res.statusCode).toBe(405);
      expect(res.headers.allow).toBe('GET, HEAD');
    }
  });
});
