import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addressKey } from '../../../src/limits/address-key.js';
import { MAX_PENDING_DEVICE_CODES, MAX_PENDING_DEVICE_CODES_PER_ADDRESS as PER_ADDRESS } from '../../../src/oauth/device/device-authorization.js';
import { lockAddressDeviceCodes, lockPendingDeviceCodes } from '../../../src/storage/device-codes.js';
import type { Database } from '../../../src/storage/schema.js';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { createClient, insertWaitingDeviceCodes, type TestClient } from '../fixtures.js';
import { form, FORM } from '../oauth-app.js';
import { Browser, expectPageHeaders, hiddenInputs, pageAlert, pageHeading } from './browser.js';
import { countRows, createUser, expectTokenError, expectTokens, openFlowApp, PASSWORD, type FlowApp } from './flow.js';

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/** The user code the device approval page shows, or null. */
function shownUserCode(html: string): string | null {
  return /<strong id="user-code">([^<]*)<\/strong>/.exec(html)?.[1] ?? null;
}

describe.each(DATABASE_KINDS)('device authorization grant (RFC 8628) on %s', (kind) => {
  /** Waiting codes of `client` stored directly (what many requests would leave behind). */
  const insertWaitingCodes = (client: TestClient, codes: Parameters<typeof insertWaitingDeviceCodes>[2]) => insertWaitingDeviceCodes(app.db, client.client, codes);

  let app: FlowApp;
  let tv: TestClient;
  let user: UserRecord;

  beforeAll(async () => {
    app = await openFlowApp(kind);
    tv = await createClient(app.db, {
      name: 'Living-room TV',
      type: 'public',
      secretHash: null,
      grantTypes: [DEVICE_GRANT, 'refresh_token'],
      scopes: ['read:posts', 'write:posts', 'offline_access'],
      role: null,
    });
    user = await createUser(app.db);
  });
  afterAll(() => app.close());

  const start = async (scope = 'read:posts write:posts offline_access') => {
    const reply = await app.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: FORM, payload: form({ client_id: tv.client.clientId, scope }) });
    expect(reply.statusCode, reply.body).toBe(200);
    expect(reply.headers['cache-control']).toBe('no-store');
    return reply.json() as { device_code: string; user_code: string; verification_uri: string; verification_uri_complete: string; expires_in: number; interval: number };
  };
  const poll = (deviceCode: string, client: TestClient = tv) =>
    app.oauth.app.inject({ method: 'POST', url: '/oauth/token', headers: FORM, payload: form({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: client.client.clientId }) });
  /** The user's side: open the code's page, sign in, then answer the consent form. */
  async function answer(userCode: string, decision: 'allow' | 'deny', scopes?: string[]) {
    const browser = new Browser(app.oauth.app);
    let page = await browser.visit(`/oauth/device?user_code=${encodeURIComponent(userCode)}`);
    expect(pageHeading(page.body)).toBe('Sign in');
    const login = hiddenInputs(page.body);
    page = await browser.submit('/oauth/login', { ...login, email: user.email, password: PASSWORD });
    expect({ status: page.statusCode, heading: pageHeading(page.body) }).toEqual({ status: 200, heading: 'Allow Living-room TV access?' });
    expectPageHeaders(page);
    expect(shownUserCode(page.body)).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    const fields: [string, string][] = Object.entries(hiddenInputs(page.body));
    for (const scope of scopes ?? ['read:posts', 'write:posts', 'offline_access']) fields.push(['scope', scope]);
    fields.push(['decision', decision]);
    return browser.submit('/oauth/device', fields);
  }

  it('issues the codes RFC 8628 §3.2 describes', async () => {
    const started = await start();
    expect(started).toEqual({
      device_code: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      user_code: expect.stringMatching(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/),
      verification_uri: `${app.config.issuer}/oauth/device`,
      verification_uri_complete: `${app.config.issuer}/oauth/device?user_code=${started.user_code}`,
      expires_in: 600,
      interval: 5,
    });
    // Stored as digests: neither the device code nor anything derived from it in clear.
    const rows = await app.db.kysely.selectFrom('deviceCodes').selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain(started.device_code);
    // The grant the code starts is a decision in the audit log, as a token issued is.
    const stored = await app.db.kysely.selectFrom('deviceCodes').select('grantId').where('userCode', '=', started.user_code.replace('-', '')).executeTakeFirstOrThrow();
    expect(app.oauth.decisions.filter((d) => d.operation === 'device_authorization' && d.resourceId === stored.grantId)).toEqual([
      {
        requestId: expect.any(String),
        interface: 'oauth',
        operation: 'device_authorization',
        sourceAddress: '127.0.0.1',
        subject: null,
        clientId: tv.client.clientId,
        resourceType: 'grant',
        resourceId: stored.grantId,
        decision: 'allow',
        reason: 'granted',
        scopes: 'read:posts write:posts offline_access',
      },
    ]);
  });

  it('answers authorization_pending, then slow_down (+5 s) when polled too fast, then tokens once approved, once', async () => {
    const started = await start();
    expectTokenError(await poll(started.device_code), 400, 'authorization_pending', 'The user has not answered yet.');
    expectTokenError(await poll(started.device_code), 400, 'slow_down', 'Poll at most every 10 seconds.');
    expectTokenError(await poll(started.device_code), 400, 'slow_down', 'Poll at most every 15 seconds.');
    const done = await answer(started.user_code.toLowerCase().replace('-', ''), 'allow', ['read:posts', 'offline_access']);
    expect({ status: done.statusCode, heading: pageHeading(done.body) }).toEqual({ status: 200, heading: 'Device connected' });
    const tokens = expectTokens(await poll(started.device_code), { scope: 'read:posts offline_access', refreshToken: true, idToken: false });
    expect((await app.oauth.tokens.verifyAccessToken(tokens.access_token)).subject).toBe(user.id);
    expectTokenError(await poll(started.device_code), 400, 'invalid_grant', 'The device code was already used.');
    // The user sees the device among the applications they allowed, and can end its access there.
    const consents = await app.db.kysely.selectFrom('consents').select(['clientId', 'scopes']).where('userId', '=', user.id).execute();
    expect(consents).toEqual([{ clientId: tv.client.clientId, scopes: 'offline_access read:posts' }]);
  });

  it('shows the user code being approved and the application asking, so the user can compare them with the device (RFC 8628 §5.4)', async () => {
    const started = await start('read:posts');
    const browser = new Browser(app.oauth.app);
    // Typed the way users type it: lower case, no dash. The page shows it as the device does.
    const login = await browser.visit(`/oauth/device?user_code=${started.user_code.toLowerCase().replace('-', '')}`);
    const page = await browser.submit('/oauth/login', { ...hiddenInputs(login.body), email: user.email, password: PASSWORD });
    expect({ status: page.statusCode, heading: pageHeading(page.body), code: shownUserCode(page.body) }).toEqual({
      status: 200,
      heading: 'Allow Living-room TV access?',
      code: started.user_code,
    });
    expectPageHeaders(page);
    expect(page.body).toContain(`<p>Your device should show the code <strong id="user-code">${started.user_code}</strong>. If it shows another code, deny: someone else is asking for access.</p>`);
    expect(page.body).toContain('<legend>Living-room TV asks to:</legend>');
    expect(hiddenInputs(page.body)).toEqual({ user_code: started.user_code.replace('-', ''), csrf_token: expect.any(String) });
  });

  it('gives the device no refresh token when the user unticked offline_access', async () => {
    const started = await start('read:posts offline_access');
    const done = await answer(started.user_code, 'allow', ['read:posts']);
    expect({ status: done.statusCode, heading: pageHeading(done.body) }).toEqual({ status: 200, heading: 'Device connected' });
    expectTokens(await poll(started.device_code), { scope: 'read:posts', refreshToken: false, idToken: false });
  });

  it('answers access_denied after the user denies, and issues nothing', async () => {
    const started = await start();
    const before = await countRows(app.db, 'accessTokens');
    const done = await answer(started.user_code, 'deny');
    expect(pageHeading(done.body)).toBe('Device not connected');
    expectTokenError(await poll(started.device_code), 400, 'access_denied', 'The user denied the request.');
    expect(await countRows(app.db, 'accessTokens')).toBe(before);
  });

  it('answers expired_token once the codes have expired, and the page no longer accepts the user code', async () => {
    const started = await start();
    await app.db.kysely.updateTable('deviceCodes').set({ expiresAt: new Date(Date.now() - 1000).toISOString() }).where('userCode', '=', started.user_code.replace('-', '')).execute();
    expectTokenError(await poll(started.device_code), 400, 'expired_token', 'The device code has expired; start again.');
    const page = await new Browser(app.oauth.app, '10.0.0.7').visit(`/oauth/device?user_code=${started.user_code}`);
    expect({ status: page.statusCode, alert: pageAlert(page.body) }).toEqual({ status: 400, alert: 'That code is not valid or has expired. Check the code on your device.' });
  });

  it('refuses another client\'s device code and a client without the grant', async () => {
    const started = await start();
    const other = await createClient(app.db, { type: 'public', secretHash: null, grantTypes: [DEVICE_GRANT], scopes: ['read:posts'], role: null });
    expectTokenError(await poll(started.device_code, other), 400, 'invalid_grant', 'The device code is not valid.');
    const web = await createClient(app.db, { type: 'public', secretHash: null, grantTypes: ['authorization_code'], redirectUris: ['http://127.0.0.1/cb'], scopes: ['read:posts'], role: null });
    const refused = await app.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: FORM, payload: form({ client_id: web.client.clientId }) });
    expectTokenError(refused, 400, 'unauthorized_client', 'The client may not use the device authorization grant.');
    const widened = await app.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: FORM, payload: form({ client_id: tv.client.clientId, scope: 'read:users' }) });
    expectTokenError(widened, 400, 'invalid_scope', 'The client may not request: read:users.');
  });

  it('refuses a request without scope as invalid_scope, like the authorization endpoint, starting nothing', async () => {
    const rows = async () => (await app.db.kysely.selectFrom('deviceCodes').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n;
    const before = Number(await rows());
    const recorded = app.oauth.decisions.length;
    for (const payload of [form({ client_id: tv.client.clientId }), form({ client_id: tv.client.clientId, scope: '' })]) {
      const reply = await app.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: FORM, payload });
      expectTokenError(reply, 400, 'invalid_scope', 'scope is required: request the scopes the application needs.');
    }
    expect(Number(await rows())).toBe(before);
    const refusal = { subject: null, clientId: tv.client.clientId, operation: 'device_authorization', decision: 'deny', reason: 'scope' };
    expect(app.oauth.decisions.slice(recorded)).toEqual([expect.objectContaining(refusal), expect.objectContaining(refusal)]);
  });

  it(`keeps at most ${MAX_PENDING_DEVICE_CODES} codes of one client waiting, whoever asks: then 429, nothing written`, async () => {
    const crowded = await createClient(app.db, { name: 'Crowded TV', type: 'public', secretHash: null, grantTypes: [DEVICE_GRANT], scopes: ['read:posts'], role: null });
    const now = Date.now();
    // Expired codes do not count; live ones up to one short of the cap.
    await insertWaitingCodes(crowded, [
      ...Array.from({ length: 50 }, (_, i) => ({ key: `crowded-${i}`, userCode: `Z${i.toString().padStart(7, '0')}`, expiresAt: now - 1000 })),
      ...Array.from({ length: MAX_PENDING_DEVICE_CODES - 1 }, (_, i) => ({
        key: `crowded-${50 + i}`,
        userCode: `Z${(50 + i).toString().padStart(7, '0')}`,
        // The first to expire does in 90 s: Retry-After points there.
        expiresAt: now + (i === 7 ? 90_000 : 600_000),
      })),
    ]);
    const ask = (client: TestClient) =>
      app.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: FORM, payload: form({ client_id: client.client.clientId, scope: 'read:posts' }) });
    expect((await ask(crowded)).statusCode).toBe(200);
    const count = async () => Number((await app.db.kysely.selectFrom('deviceCodes').select((eb) => eb.fn.countAll<number>().as('n')).where('clientRegistrationId', '=', crowded.client.id).executeTakeFirstOrThrow()).n);
    const before = await count();
    const refused = await ask(crowded);
    expectTokenError(refused, 429, 'temporarily_unavailable', 'Too many device codes of this client are waiting for their users; retry after Retry-After seconds.');
    expect(Number(refused.headers['retry-after'])).toBeOneOf([89, 90]);
    expect(await count()).toBe(before);
    // Another client's users are not affected.
    expect((await ask(tv)).statusCode).toBe(200);
  });

  describe('codes waiting per address', () => {
    /** A public device client of its own, so that the codes other tests start do not count. */
    const deviceClient = () =>
      createClient(app.db, { name: 'Living-room TV', type: 'public', secretHash: null, grantTypes: [DEVICE_GRANT], scopes: ['read:posts'], role: null });
    const ask = (client: TestClient, remoteAddress: string) =>
      app.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', remoteAddress, headers: FORM, payload: form({ client_id: client.client.clientId, scope: 'read:posts' }) });
    const started = async (client: TestClient, remoteAddress: string) => {
      const reply = await ask(client, remoteAddress);
      expect(reply.statusCode, reply.body).toBe(200);
      return reply.json() as { device_code: string; user_code: string };
    };
    const rowsOf = async (client: TestClient) =>
      Number((await app.db.kysely.selectFrom('deviceCodes').select((eb) => eb.fn.countAll<number>().as('n')).where('clientRegistrationId', '=', client.client.id).executeTakeFirstOrThrow()).n);
    const ADDRESS_FULL = 'Too many device codes of this client requested from this address are waiting for their users; retry after Retry-After seconds.';
    const CLIENT_FULL = 'Too many device codes of this client are waiting for their users; retry after Retry-After seconds.';
    /** Refused; by default the codes waiting were all started just now, so the first frees its place in ten minutes. */
    const expectRefused = (reply: Awaited<ReturnType<typeof ask>>, description: string, retryAfter: number[] = [599, 600]) => {
      expectTokenError(reply, 429, 'temporarily_unavailable', description);
      expect(Number(reply.headers['retry-after'])).toBeOneOf(retryAfter);
    };

    it("points Retry-After at the moment the address's first waiting code expires", async () => {
      const tv = await deviceClient();
      const now = Date.now();
      await insertWaitingCodes(
        tv,
        Array.from({ length: PER_ADDRESS }, (_, i) => ({
          key: `soon-${tv.client.id}-${i}`,
          userCode: `S${i.toString().padStart(7, '0')}`,
          expiresAt: now + (i === 3 ? 45_000 : 500_000),
          addressKey: '192.0.2.77',
        })),
      );
      expectRefused(await ask(tv, '192.0.2.77'), ADDRESS_FULL, [44, 45]);
    });

    it(`keeps at most ${PER_ADDRESS} codes of one client waiting per address (an IPv6 /64 is one): then 429, nothing written`, async () => {
      const tv = await deviceClient();
      // Every host of one /64 draws on the same share, as on the address's request budget.
      for (let i = 1; i <= PER_ADDRESS; i++) await started(tv, `2001:db8:7:1::${i.toString(16)}`);
      const keys = await app.db.kysely.selectFrom('deviceCodes').select('addressKey').distinct().where('clientRegistrationId', '=', tv.client.id).execute();
      expect(keys).toEqual([{ addressKey: '2001:db8:7:1::/64' }]);
      expectRefused(await ask(tv, '2001:db8:7:1:ffff:ffff:ffff:ffff'), ADDRESS_FULL);
      expect(await rowsOf(tv)).toBe(PER_ADDRESS);
      // Other addresses, and the same address for another client, are not affected.
      await started(tv, '2001:db8:7:2::1');
      await started(tv, '192.0.2.40');
      await started(await deviceClient(), '2001:db8:7:1::1');
      expectRefused(await ask(tv, '2001:db8:7:1::1'), ADDRESS_FULL);
    });

    it('frees an address\'s share as its codes are answered or expire', async () => {
      const tv = await deviceClient();
      const address = '198.51.100.7';
      const codes = [];
      for (let i = 0; i < PER_ADDRESS; i++) codes.push(await started(tv, address));
      expectRefused(await ask(tv, address), ADDRESS_FULL);
      // Approved and redeemed: the device has its tokens, the code no longer waits.
      const approved = await answer(codes[0]!.user_code, 'allow', ['read:posts']);
      expect(pageHeading(approved.body)).toBe('Device connected');
      expectTokens(await poll(codes[0]!.device_code, tv), { scope: 'read:posts', refreshToken: false, idToken: false });
      await started(tv, address);
      expectRefused(await ask(tv, address), ADDRESS_FULL);
      // Denied by the user.
      expect(pageHeading((await answer(codes[1]!.user_code, 'deny', ['read:posts'])).body)).toBe('Device not connected');
      await started(tv, address);
      expectRefused(await ask(tv, address), ADDRESS_FULL);
      // Expired, never answered (the server's clock moves past it).
      await app.db.kysely.updateTable('deviceCodes').set({ expiresAt: new Date(Date.now() - 1000).toISOString() }).where('userCode', '=', codes[2]!.user_code.replace('-', '')).execute();
      await started(tv, address);
      expectRefused(await ask(tv, address), ADDRESS_FULL);
    });

    it('holds the per-address share against parallel requests: exactly that many are started', async () => {
      const tv = await deviceClient();
      const replies = await Promise.all(Array.from({ length: PER_ADDRESS + 10 }, () => ask(tv, '203.0.113.9')));
      expect(replies.map((reply) => reply.statusCode).sort()).toEqual([...Array<number>(PER_ADDRESS).fill(200), ...Array<number>(10).fill(429)]);
      for (const reply of replies.filter((r) => r.statusCode === 429)) expectRefused(reply, ADDRESS_FULL);
      expect(await rowsOf(tv)).toBe(PER_ADDRESS);
    });

    it(`still holds the client's ${MAX_PENDING_DEVICE_CODES} against many addresses asking at once`, async () => {
      const tv = await deviceClient();
      const now = Date.now();
      // What 500 /64s could leave behind, each within its share: all but five of the client's codes.
      await insertWaitingCodes(
        tv,
        Array.from({ length: MAX_PENDING_DEVICE_CODES - 5 }, (_, i) => ({
          key: `many-${tv.client.id}-${i}`,
          userCode: `W${i.toString().padStart(7, '0')}`,
          expiresAt: now + 600_000,
          addressKey: `2001:db8:${(i % 500).toString(16)}:0::/64`,
        })),
      );
      const replies = await Promise.all(Array.from({ length: 12 }, (_, i) => ask(tv, `192.0.2.${100 + i}`)));
      expect(replies.map((reply) => reply.statusCode).sort()).toEqual([...Array<number>(5).fill(200), ...Array<number>(7).fill(429)]);
      for (const reply of replies.filter((r) => r.statusCode === 429)) expectRefused(reply, CLIENT_FULL);
      expect(await rowsOf(tv)).toBe(MAX_PENDING_DEVICE_CODES);
    });

    // On PostgreSQL the counts are ordered by advisory locks (on SQLite by the write lock, which orders
    // everything): one per address, and one per client taken only near the client's bound.
    if (kind === 'postgres') describe('the locks that order the counts', () => {
      /** Runs `work` while another transaction holds the lock `take` takes. */
      async function whileHeld<T>(take: (trx: Kysely<Database>) => Promise<unknown>, work: () => Promise<T>): Promise<T> {
        let release!: () => void;
        const released = new Promise<void>((resolve) => (release = resolve));
        let held!: () => void;
        const taken = new Promise<void>((resolve) => (held = resolve));
        const holder = app.db.kysely.transaction().execute(async (trx) => {
          await take(trx);
          held();
          await released;
        });
        await taken;
        try {
          return await work();
        } finally {
          release();
          await holder;
        }
      }
      /** Transactions of this database waiting for one of the device codes' advisory locks. */
      const waiting = async (lock: number) =>
        Number(
          (
            await sql<{ n: string }>`select count(*) as n from pg_locks where locktype = 'advisory' and not granted and classid = ${lock}
              and database = (select oid from pg_database where datname = current_database())`.execute(app.db.kysely)
          ).rows[0]!.n,
        );
      const ADDRESS_LOCK = 0x64657661;
      const CLIENT_LOCK = 0x64657663;
      /** Polls until `lock` has a waiter, for at most two seconds. */
      async function untilWaiting(lock: number): Promise<void> {
        for (let i = 0; i < 200 && (await waiting(lock)) === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const answered = (reply: Promise<unknown>) =>
        Promise.race([reply.then(() => 'answered'), new Promise((resolve) => setTimeout(resolve, 3000, 'still waiting'))]);

      /** A client with `count` codes waiting, none of them this test's addresses'. */
      async function clientWith(count: number, letter: string) {
        const tv = await deviceClient();
        const now = Date.now();
        await insertWaitingCodes(
          tv,
          Array.from({ length: count }, (_, i) => ({ key: `held-${tv.client.id}-${i}`, userCode: `${letter}${i.toString().padStart(7, '0')}`, expiresAt: now + 600_000 })),
        );
        return tv;
      }

      it("far from the client's bound, requests hold the client's lock shared: one in flight does not hold up another", async () => {
        const tv = await deviceClient();
        const reply = await whileHeld(
          (trx) => lockPendingDeviceCodes(trx, tv.client.id, 'shared'),
          async () => {
            const pending = ask(tv, '192.0.2.61');
            expect(await answered(pending)).toBe('answered');
            return pending;
          },
        );
        expect(reply.statusCode, reply.body).toBe(200);
      });

      it('near it, a request takes the lock exclusively and so waits for the requests in flight far from it, then counts', async () => {
        const tv = await clientWith(MAX_PENDING_DEVICE_CODES - 999, 'H');
        let heldUntil = 0;
        const pending = await whileHeld(
          (trx) => lockPendingDeviceCodes(trx, tv.client.id, 'shared'),
          async () => {
            const pending = ask(tv, '192.0.2.62');
            await untilWaiting(CLIENT_LOCK);
            expect(await waiting(CLIENT_LOCK)).toBe(1);
            await new Promise((resolve) => setTimeout(resolve, 1100));
            heldUntil = Date.now();
            return { pending };
          },
        );
        expect((await pending.pending).statusCode).toBe(200);
        // Its code is timed from when it was stored, after the wait: it lives the whole expires_in it was given.
        const stored = await app.db.kysely
          .selectFrom('deviceCodes')
          .select(['createdAt', 'expiresAt'])
          .where('clientRegistrationId', '=', tv.client.id)
          .where('addressKey', '=', addressKey('192.0.2.62'))
          .executeTakeFirstOrThrow();
        expect(Date.parse(stored.createdAt)).toBeGreaterThanOrEqual(heldUntil);
        expect(Date.parse(stored.expiresAt) - Date.parse(stored.createdAt)).toBe(600_000);
      });

      it("near it, this process's requests from many addresses wait for the client's lock on one connection", async () => {
        const tv = await clientWith(MAX_PENDING_DEVICE_CODES - 999, 'K');
        const replies = await whileHeld(
          (trx) => lockPendingDeviceCodes(trx, tv.client.id, 'shared'),
          async () => {
            const replies = Array.from({ length: 5 }, (_, i) => ask(tv, `192.0.2.${70 + i}`));
            await untilWaiting(CLIENT_LOCK);
            // Time for the other four to reach the lock, had they each a connection to wait on.
            await new Promise((resolve) => setTimeout(resolve, 300));
            expect(await waiting(CLIENT_LOCK)).toBe(1);
            return replies;
          },
        );
        expect((await Promise.all(replies)).map((reply) => reply.statusCode)).toEqual([200, 200, 200, 200, 200]);
      });

      it('near it, at most 100 of a process\'s requests wait their turn: the rest are refused at once', async () => {
        const tv = await clientWith(MAX_PENDING_DEVICE_CODES - 999, 'L');
        let settled = 0;
        const replies = await whileHeld(
          (trx) => lockPendingDeviceCodes(trx, tv.client.id, 'shared'),
          async () => {
            const replies = Array.from({ length: 105 }, (_, i) => ask(tv, `198.18.${Math.floor(i / 200)}.${(i % 200) + 1}`).finally(() => settled++));
            // The five over the bound are answered while the lock is still held (bounded wait: 10 s).
            for (let i = 0; i < 1000 && settled < 5; i++) await new Promise((resolve) => setTimeout(resolve, 10));
            expect(settled).toBe(5);
            return replies;
          },
        );
        const answers = await Promise.all(replies);
        expect(answers.map((reply) => reply.statusCode).sort()).toEqual([...Array<number>(100).fill(200), ...Array<number>(5).fill(429)]);
        for (const refused of answers.filter((reply) => reply.statusCode === 429)) {
          expectTokenError(refused, 429, 'temporarily_unavailable', 'Too many requests for this client are waiting; retry in a second.');
          expect(refused.headers['retry-after']).toBe('1');
        }
      }, 60_000);

      it('at the bound, a request is refused without waiting for the lock', async () => {
        const tv = await clientWith(MAX_PENDING_DEVICE_CODES, 'J');
        const reply = await whileHeld(
          (trx) => lockPendingDeviceCodes(trx, tv.client.id, 'exclusive'),
          async () => {
            const pending = ask(tv, '192.0.2.65');
            expect(await answered(pending)).toBe('answered');
            return pending;
          },
        );
        expectRefused(reply, CLIENT_FULL);
      });

      it("one address's parallel requests wait for its lock on one connection, not one each", async () => {
        const tv = await deviceClient();
        const address = '192.0.2.63';
        const replies = await whileHeld(
          (trx) => lockAddressDeviceCodes(trx, tv.client.id, addressKey(address)),
          async () => {
            const replies = Array.from({ length: 5 }, () => ask(tv, address));
            await untilWaiting(ADDRESS_LOCK);
            // Time for the other four to reach the lock, had they each a connection to wait on.
            await new Promise((resolve) => setTimeout(resolve, 300));
            expect(await waiting(ADDRESS_LOCK)).toBe(1);
            // Another address is not held up.
            expect((await ask(tv, '192.0.2.64')).statusCode).toBe(200);
            return replies;
          },
        );
        expect((await Promise.all(replies)).map((reply) => reply.statusCode)).toEqual([200, 200, 200, 200, 200]);
      });
    });
  });

  it('throttles user-code guessing per address: after 30 wrong codes even a right one is refused with 429', async () => {
    const started = await start();
    const guesser = new Browser(app.oauth.app, '10.9.9.9');
    const recorded = app.oauth.decisions.length;
    for (let i = 0; i < 30; i++) {
      const wrong = await guesser.visit('/oauth/device?user_code=BCDF-BCDF');
      expect(wrong.statusCode).toBe(400);
    }
    // Each wrong code is a refused credential of the address, as a wrong password is (aggregated per window).
    expect(app.oauth.decisions.slice(recorded)).toEqual(
      Array<unknown>(30).fill({
        requestId: expect.any(String),
        sourceAddress: '10.9.9.9',
        interface: 'oauth',
        operation: 'device',
        subject: null,
        clientId: null,
        resourceType: null,
        resourceId: null,
        decision: 'deny',
        reason: 'authentication',
      }),
    );
    const right = await guesser.visit(`/oauth/device?user_code=${started.user_code}`);
    expect({ status: right.statusCode, retryAfter: Number(right.headers['retry-after']) > 0 }).toEqual({ status: 429, retryAfter: true });
    // Another address is not affected.
    const elsewhere = await new Browser(app.oauth.app, '10.9.9.10').visit(`/oauth/device?user_code=${started.user_code}`);
    expect(pageHeading(elsewhere.body)).toBe('Sign in');
  });

  it('refuses a consent form without its CSRF token, recording nothing', async () => {
    const started = await start();
    const browser = new Browser(app.oauth.app);
    const login = await browser.visit(`/oauth/device?user_code=${started.user_code}`);
    const consent = await browser.submit('/oauth/login', { ...hiddenInputs(login.body), email: user.email, password: PASSWORD });
    const fields = hiddenInputs(consent.body);
    const forged = await browser.submit('/oauth/device', { user_code: fields.user_code!, scope: 'read:posts', decision: 'allow' });
    expect(forged.statusCode).toBe(403);
    expectTokenError(await poll(started.device_code), 400, 'authorization_pending', 'The user has not answered yet.');
  });
});
