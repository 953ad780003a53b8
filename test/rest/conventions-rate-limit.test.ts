import { describe, expect, it, vi } from 'vitest';
import { findClientByClientId, insertClient } from '../../src/storage/clients.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { ADMIN_CLIENT_ID, ALL_API_SCOPES, startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

// A day-long window so that a test never straddles a window boundary (windows are aligned to the clock).
const LIMITS = { RATE_LIMIT_MAX: '5', RATE_LIMIT_ANONYMOUS_MAX: '3', RATE_LIMIT_WINDOW: '86400' };

type Res = Awaited<ReturnType<TestApp['request']>>;

/** `"<policy>";r=<remaining>;t=<seconds>` -> its parts. */
function parseRateLimit(res: Res): { policy: string; remaining: number; reset: number } {
  const match = /^"([a-z]+)";r=(\d+);t=(\d+)$/.exec(String(res.headers.ratelimit));
  expect(match, String(res.headers.ratelimit)).not.toBeNull();
  return { policy: match![1]!, remaining: Number(match![2]), reset: Number(match![3]) };
}

function expectRateLimited(res: Res, policy: string) {
  const { reset } = parseRateLimit(res);
  expect(reset).toBeGreaterThan(0);
  expect(reset).toBeLessThanOrEqual(86400);
  expect({
    status: res.statusCode,
    retryAfter: res.headers['retry-after'],
    policy: res.headers['ratelimit-policy'],
    ratelimit: res.headers.ratelimit,
    body: res.json(),
  }).toEqual({
    status: 429,
    retryAfter: String(reset),
    policy,
    ratelimit: `${policy.split(';')[0]};r=0;t=${reset}`,
    body: { error: { code: 'RATE_LIMITED', message: `Too many requests; retry in ${reset} s.` } },
  });
}

async function withApp(kind: 'sqlite' | 'postgres', run: (t: TestApp) => Promise<void>, env: Record<string, string> = {}) {
  const t = await startTestApp(kind, { ...LIMITS, ...env });
  try {
    await run(t);
  } finally {
    await t.close();
  }
}

function anonymous(t: TestApp, ip: string, url = '/v1/rest'): Promise<Res> {
  return t.app.fastify
    .inject({ method: 'GET', url, remoteAddress: ip })
    .then((r) => ({ statusCode: r.statusCode, headers: r.headers, body: r.body, json: () => JSON.parse(r.body) }));
}

describe.each(DATABASE_KINDS)('REST rate limits on %s', (kind) => {
  it('sends RateLimit-Policy and RateLimit, and answers the 6th request of a client in the window with 429', async () => {
    await withApp(kind, async (t) => {
      const user = await t.createUser('member');
      const token = await user.token();
      for (let i = 1; i <= 5; i++) {
        const res = await t.request({ url: `/v1/users/${user.id}`, token });
        expect(res.statusCode).toBe(200);
        expect(res.headers['ratelimit-policy']).toBe('"client";q=5;w=86400');
        expect(parseRateLimit(res)).toMatchObject({ policy: 'client', remaining: 5 - i });
      }
      expectRateLimited(await t.request({ url: `/v1/users/${user.id}`, token }), '"client";q=5;w=86400');
      // Writes are refused too, and refused before they run.
      expectRateLimited(
        await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 't', body: '', status: 'draft' } }),
        '"client";q=5;w=86400',
      );
      const posts = await t.app.db.kysely.selectFrom('posts').selectAll().execute();
      expect(posts).toEqual([]);
    });
  });

  it('counts per client: another user of the same client shares the budget, another client does not', async () => {
    await withApp(kind, async (t) => {
      const first = await t.createUser('member');
      const second = await t.createUser('member');
      const admin = (await findClientByClientId(t.app.db.kysely, ADMIN_CLIENT_ID))!;
      const other = await insertClient(t.app.db.kysely, { ...admin, id: newId(), clientId: 'other-client' }, nowIso());
      const otherToken = (
        await t.app.tokens.issueAccessToken({ client: other, subject: second.id, subjectType: 'user', scopes: ALL_API_SCOPES, grantType: 'authorization_code' })
      ).accessToken;

      const firstToken = await first.token();
      for (let i = 0; i < 5; i++) expect((await t.request({ url: '/v1/posts', token: firstToken })).statusCode).toBe(200);
      expectRateLimited(await t.request({ url: '/v1/posts', token: await second.token() }), '"client";q=5;w=86400');

      const viaOther = await t.request({ url: '/v1/posts', token: otherToken });
      expect(viaOther.statusCode).toBe(200);
      // The other client's budget is whole (4 left), but the user's own has paid for the refused request
      // too (3 left): a user's token draws on both, and the headers show the tighter one.
      expect(parseRateLimit(viaOther)).toMatchObject({ policy: 'user', remaining: 3 });
    });
  });

  it('counts anonymous callers per IP address, separately from clients', async () => {
    await withApp(kind, async (t) => {
      for (let i = 1; i <= 3; i++) {
        const res = await anonymous(t, '10.0.0.1');
        expect(res.statusCode).toBe(200);
        expect(res.headers['ratelimit-policy']).toBe('"anonymous";q=3;w=86400');
        expect(parseRateLimit(res)).toMatchObject({ policy: 'anonymous', remaining: 3 - i });
      }
      expectRateLimited(await anonymous(t, '10.0.0.1'), '"anonymous";q=3;w=86400');
      // Anonymous requests to protected operations count as well.
      expectRateLimited(await anonymous(t, '10.0.0.1', '/v1/posts'), '"anonymous";q=3;w=86400');

      const otherIp = await anonymous(t, '10.0.0.2');
      expect(otherIp.statusCode).toBe(200);
      expect(parseRateLimit(otherIp)).toMatchObject({ policy: 'anonymous', remaining: 2 });

      // An authenticated client calling from the exhausted address has its own budget.
      const user = await t.createUser('member');
      const res = await t.app.fastify.inject({
        method: 'GET',
        url: '/v1/posts',
        remoteAddress: '10.0.0.1',
        headers: { authorization: `Bearer ${await user.token()}` },
      });
      expect(res.statusCode).toBe(200);
      expect(res.headers['ratelimit-policy']).toBe('"client";q=5;w=86400');
    });
  });

  it('counts every address of one IPv6 /64 as one caller, on the API and the authorization server alike', async () => {
    await withApp(kind, async (t) => {
      // One host walking the addresses of its own /64 spends one budget.
      for (let i = 1; i <= 3; i++) expect((await anonymous(t, `2001:db8:7:7::${i.toString(16)}`)).statusCode).toBe(200);
      expectRateLimited(await anonymous(t, '2001:db8:7:7:ffff::4'), '"anonymous";q=3;w=86400');
      const otherNetwork = await anonymous(t, '2001:db8:7:8::1');
      expect(otherNetwork.statusCode).toBe(200);
      expect(parseRateLimit(otherNetwork)).toMatchObject({ policy: 'anonymous', remaining: 2 });
      const device = (address: string) =>
        t.app.fastify.inject({ method: 'POST', url: '/oauth/device_authorization', remoteAddress: address, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'client_id=nobody' });
      for (let i = 1; i <= 3; i++) expect((await device(`2001:db8:9:9::${i}`)).statusCode).not.toBe(429);
      expect((await device('2001:db8:9:9:1:2:3:4')).statusCode).toBe(429);
      // Probes of unknown paths and the API reference page spend the same budget.
      for (const url of ['/nope', '/docs']) {
        const network = url === '/nope' ? '2001:db8:a:a' : '2001:db8:b:b';
        const statuses = [];
        for (let i = 1; i <= 4; i++) statuses.push((await t.app.fastify.inject({ url, remoteAddress: `${network}::${i}` })).statusCode);
        expect({ url, statuses }).toEqual({ url, statuses: [...statuses.slice(0, 3), 429] });
        expect(statuses.slice(0, 3)).not.toContain(429);
      }
    });
  });

  it('limits the token endpoint per address, before any credential is checked', async () => {
    await withApp(kind, async (t) => {
      const tokenRequest = () =>
        t.app.fastify.inject({
          method: 'POST',
          url: '/oauth/token',
          remoteAddress: '10.0.0.7',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'grant_type=client_credentials&client_id=nobody&client_secret=guess',
        });
      for (let i = 0; i < 3; i++) {
        const res = await tokenRequest();
        expect(res.statusCode).toBe(401);
        expect(res.headers['ratelimit-policy']).toBe('"oauth";q=3;w=86400');
      }
      const limited = await tokenRequest();
      expect(limited.statusCode).toBe(429);
      expect(limited.headers['retry-after']).toMatch(/^\d+$/);
      expect(limited.headers['cache-control']).toBe('no-store');
      expect(JSON.parse(limited.body)).toEqual({
        error: 'temporarily_unavailable',
        error_description: `Too many requests; retry in ${limited.headers['retry-after']} s.`,
      });
    });
  });

  it('counts probes of unknown paths and wrong methods against the address', async () => {
    await withApp(kind, async (t) => {
      const probe = (url: string, method = 'GET') => t.app.fastify.inject({ method: method as never, url, remoteAddress: '10.0.0.9' });
      const missing = await probe('/v1/nothing-here');
      expect(missing.statusCode).toBe(404);
      expect(missing.headers['ratelimit-policy']).toBe('"anonymous";q=3;w=86400');
      const wrongMethod = await probe('/v1/posts', 'PATCH');
      expect(wrongMethod.statusCode).toBe(405);
      expect(wrongMethod.headers.ratelimit).toMatch(/^"anonymous";r=1;t=\d+$/);
      await probe('/v1/also-missing');
      const limited = await probe('/v1/still-missing');
      expect(limited.statusCode).toBe(429);
      expect(limited.headers['retry-after']).toMatch(/^\d+$/);
      expect(JSON.parse(limited.body).error.code).toBe('RATE_LIMITED');
    });
  });

  it('refuses a flood of unverified tokens per address before verifying them; a verified token from there still works', async () => {
    await withApp(
      kind,
      async (t) => {
        const user = await t.createUser('member');
        const token = await user.token();
        const fromFlooder = (authorization: string) =>
          t.app.fastify.inject({ method: 'GET', url: '/v1/posts', remoteAddress: '10.0.0.66', headers: { authorization } });
        expect((await fromFlooder(`Bearer ${token}`)).statusCode).toBe(200);
        const verify = vi.spyOn(t.app.tokens, 'verifyAccessToken');
        const statuses: number[] = [];
        for (let i = 0; i < 10; i++) statuses.push((await fromFlooder(`Bearer forged-${i}.x.y`)).statusCode);
        // The address's budget of 4 covered the token that was verified above and three forged ones.
        expect(statuses).toEqual([401, 401, 401, 429, 429, 429, 429, 429, 429, 429]);
        expect(verify).toHaveBeenCalledTimes(3);
        const refused = await fromFlooder('Bearer forged-last.x.y');
        expect({ status: refused.statusCode, policy: refused.headers['ratelimit-policy'], body: JSON.parse(refused.body).error.code }).toEqual({
          status: 429,
          policy: '"address";q=4;w=86400',
          body: 'RATE_LIMITED',
        });
        expect(refused.headers['retry-after']).toMatch(/^\d+$/);
        // A token this server has verified costs nothing to check: its client's budget applies, not the address's.
        const hot = await fromFlooder(`Bearer ${token}`);
        expect(hot.statusCode).toBe(200);
        expect(hot.headers['ratelimit-policy']).toBe('"client";q=5;w=86400');
        expect(verify).toHaveBeenCalledTimes(3);
        // Requests without credentials cost no verification and spend only the anonymous budget: however
        // many come from an address (one NAT for many people), a fresh token from there is still checked.
        for (let i = 0; i < 8; i++) expect((await t.app.fastify.inject({ url: '/v1/rest', remoteAddress: '10.0.0.67' })).statusCode).toBe(200);
        const fresh = await (await t.createUser('member')).token();
        const fromNat = await t.app.fastify.inject({ url: '/v1/posts', remoteAddress: '10.0.0.67', headers: { authorization: `Bearer ${fresh}` } });
        expect(fromNat.statusCode).toBe(200);
      },
      { RATE_LIMIT_ADDRESS_MAX: '4', RATE_LIMIT_ANONYMOUS_MAX: '1000' },
    );
  });

  it('counts requests with an invalid token against the address, so that guessing tokens is limited', async () => {
    await withApp(kind, async (t) => {
      for (let i = 0; i < 3; i++) {
        const res = await t.request({ url: '/v1/posts', token: `guess-${i}` });
        expect(res.statusCode).toBe(401);
        expect(res.json()).toEqual({ error: { code: 'UNAUTHENTICATED', message: 'The access token is invalid, expired or revoked.' } });
      }
      expectRateLimited(await t.request({ url: '/v1/posts', token: 'guess-4' }), '"anonymous";q=3;w=86400');
    });
  });
});
