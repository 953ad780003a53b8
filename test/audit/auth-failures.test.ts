import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthFailureAggregator } from '../../src/audit/auth-failures.js';
import { verifyAuditChain } from '../../src/audit/verify-chain.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { sampleDecision } from '../helpers/audit.js';

// An anonymous flood of refused credentials must not grow the audit table by a row per request, and must
// not go unrecorded either: one event per address and window, whose counts add up to the requests refused.

describe('aggregating refused credentials', () => {
  it('tells apart at most maxGroups addresses per window, counting the rest under no address', () => {
    const aggregator = new AuthFailureAggregator(3);
    const refused = (address: string) => sampleDecision(0, { decision: 'deny', reason: 'authentication', sourceAddress: address });
    for (let i = 0; i < 5; i++) for (let n = 0; n <= i; n++) aggregator.add(refused(`10.0.0.${i}`), 1_000 + n);
    aggregator.add(refused('not an address'), 2_000);
    expect(aggregator.size).toBe(4);
    const events = aggregator.drain(5_000);
    expect(events.map((e) => [e.sourceAddress, e.count])).toEqual([
      ['10.0.0.0', 1],
      ['10.0.0.1', 2],
      ['10.0.0.2', 3],
      [null, 4 + 5 + 1],
    ]);
    expect(events[1]).toMatchObject({ time: new Date(5_000).toISOString(), firstSeen: new Date(1_000).toISOString(), lastSeen: new Date(1_001).toISOString(), decision: 'deny', reason: 'authentication' });
    expect(aggregator.size).toBe(0);
  });
});

describe.each(DATABASE_KINDS)('refused credentials in the audit log on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    // The longest window: the test ends it itself (closeFailureWindow), so however slow the machine, every
    // refusal it sends falls into one window.
    t = await startTestApp(kind, { AUDIT_FAILURE_WINDOW: '3600', RATE_LIMIT_ANONYMOUS_MAX: '100000', RATE_LIMIT_ADDRESS_MAX: '100000' });
  });
  afterAll(() => t?.close());

  it('writes one event per address and window whose counts add up to every refusal, and every other decision as it is', async () => {
    const admin = await t.adminClientToken();
    await t.app.audit.flush();
    const before = Number((await t.database.db.kysely.selectFrom('auditEvents').select((eb) => eb.fn.max('seq').as('seq')).executeTakeFirstOrThrow()).seq ?? 0);
    const sent = { '198.51.100.1': 0, '198.51.100.2': 0 };
    for (let i = 0; i < 120; i++) {
      const address = i % 3 === 0 ? '198.51.100.2' : '198.51.100.1';
      const res = await t.app.fastify.inject({ url: '/v1/posts', remoteAddress: address, headers: { authorization: `Bearer forged-${i}.x.y` } });
      expect(res.statusCode).toBe(401);
      sent[address]++;
    }
    for (let i = 0; i < 7; i++) {
      const res = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        remoteAddress: '198.51.100.1',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `grant_type=client_credentials&client_id=nobody&client_secret=guess-${i}`,
      });
      expect(res.statusCode).toBe(401);
    }
    // A different made-up client_id each time is still one group: unregistered ids are not told apart.
    for (let i = 0; i < 9; i++) {
      const res = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        remoteAddress: '198.51.100.3',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`random-${i}:x`).toString('base64')}` },
        payload: 'grant_type=client_credentials',
      });
      expect(res.statusCode).toBe(401);
    }
    // A public client needs no secret: anyone can have the token endpoint refuse it a grant, so those
    // denials are aggregated too.
    const spa = await t.request({
      method: 'POST',
      url: '/v1/clients',
      token: admin,
      body: { name: 'SPA', type: 'public', redirectUris: ['https://spa.example/cb'], grantTypes: ['authorization_code'], scopes: ['read:posts'] },
    });
    expect(spa.statusCode, spa.body).toBe(201);
    for (let i = 0; i < 5; i++) {
      const res = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        remoteAddress: '198.51.100.4',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `grant_type=client_credentials&client_id=${spa.json().clientId}`,
      });
      expect(res.statusCode).toBe(400);
    }
    // Decisions that are not refused credentials stay one event each.
    expect((await t.request({ url: '/v1/posts', token: admin })).statusCode).toBe(200);
    expect((await t.request({ url: '/v1/posts/nope', token: admin })).statusCode).toBe(404);

    // Nothing of the window is written before it ends.
    await t.app.audit.flush();
    const open = await t.database.db.kysely.selectFrom('auditEvents').select('count').where('seq', '>', before).execute();
    expect(open.filter((row) => row.count !== null)).toEqual([]);
    t.app.audit.closeFailureWindow();
    await t.app.audit.flush();
    const rows = await t.database.db.kysely.selectFrom('auditEvents').selectAll().where('seq', '>', before).orderBy('seq').execute();
    const aggregated = rows.filter((row) => row.count !== null);
    expect(
      aggregated.map((row) => ({ interface: row.interface, operation: row.operation, address: row.sourceAddress, count: Number(row.count), decision: row.decision, reason: row.reason })).sort((a, b) => a.count - b.count),
    ).toEqual([
      { interface: 'oauth', operation: 'token', address: '198.51.100.4', count: 5, decision: 'deny', reason: 'grant' },
      { interface: 'oauth', operation: 'token', address: '198.51.100.1', count: 7, decision: 'deny', reason: 'authentication' },
      { interface: 'oauth', operation: 'token', address: '198.51.100.3', count: 9, decision: 'deny', reason: 'authentication' },
      { interface: 'rest', operation: 'listPosts', address: '198.51.100.2', count: sent['198.51.100.2'], decision: 'deny', reason: 'authentication' },
      { interface: 'rest', operation: 'listPosts', address: '198.51.100.1', count: sent['198.51.100.1'], decision: 'deny', reason: 'authentication' },
    ]);
    expect(aggregated.reduce((sum, row) => sum + Number(row.count), 0)).toBe(120 + 7 + 9 + 5);
    expect(aggregated.filter((row) => row.reason === 'authentication' && row.interface === 'oauth').map((row) => row.clientId)).toEqual([null, null]);
    for (const row of aggregated) {
      expect(row.requestId).toBeNull();
      expect(Date.parse(row.firstSeen!)).toBeLessThanOrEqual(Date.parse(row.lastSeen!));
      // Timed when written: the table stays in time order.
      expect(Date.parse(row.time)).toBeGreaterThanOrEqual(Date.parse(row.lastSeen!));
    }
    expect(rows.map((row) => row.time)).toEqual([...rows.map((row) => row.time)].sort());
    const single = rows.filter((row) => row.count === null);
    expect(single.map((row) => [row.operation, row.decision, row.reason, row.count])).toEqual([
      ['createClient', 'allow', 'granted', null],
      ['listPosts', 'allow', 'granted', null],
      ['getPost', 'deny', 'resource', null],
    ]);
    expect(await verifyAuditChain(t.database.db.kysely)).toMatchObject({ ok: true, events: rows.length + 1 });

    // The endpoint shows the aggregate as the contract describes it.
    const listed = await t.request({ url: `/v1/audit-events?decision=deny&operation=token`, token: await t.adminClientToken('read:audit') });
    expect(listed.statusCode).toBe(200);
    expect(listed.json().data).toContainEqual(
      expect.objectContaining({ operation: 'token', reason: 'authentication', count: 7, sourceAddress: '198.51.100.1', firstSeen: expect.any(String), lastSeen: expect.any(String) }),
    );
  });

  it('writes the window at its end on its own, and the next refusal opens a new window', async () => {
    const short = await startTestApp(kind, { AUDIT_FAILURE_WINDOW: '1' });
    try {
      const aggregatedRows = () =>
        short.database.db.kysely.selectFrom('auditEvents').select(['sourceAddress', 'count', 'operation']).where('count', 'is not', null).orderBy('seq').execute();
      const refuse = async (address: string) =>
        expect((await short.app.fastify.inject({ url: '/v1/posts', remoteAddress: address, headers: { authorization: 'Bearer forged.x.y' } })).statusCode).toBe(401);
      await refuse('198.51.100.7');
      // One refusal cannot be split; its window ends a second later without anyone asking.
      for (let i = 0; i < 100 && (await aggregatedRows()).length === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        await short.app.audit.flush();
      }
      expect(await aggregatedRows()).toEqual([{ sourceAddress: '198.51.100.7', count: 1, operation: 'listPosts' }]);
      await refuse('198.51.100.8');
      short.app.audit.closeFailureWindow();
      await short.app.audit.flush();
      expect(await aggregatedRows()).toEqual([
        { sourceAddress: '198.51.100.7', count: 1, operation: 'listPosts' },
        { sourceAddress: '198.51.100.8', count: 1, operation: 'listPosts' },
      ]);
    } finally {
      await short.close();
    }
  });
});
