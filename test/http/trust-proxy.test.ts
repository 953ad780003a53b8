import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';

// TRUST_PROXY decides which X-Forwarded-For entries name the client, and with it the address that rate limits
// and sign-in throttling count against. Whatever a client writes itself must never move it.

const DISCOVERY = '/.well-known/openid-configuration';

describe('TRUST_PROXY', () => {
  describe('as a number of proxies (TRUST_PROXY=1)', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await startTestApp('sqlite', { TRUST_PROXY: '1', RATE_LIMIT_ANONYMOUS_MAX: '10' });
    });
    afterAll(() => t.close());

    /** A request as the one proxy in front forwards it: the client's own header, then the address the proxy saw. */
    const viaProxy = (url: string, clientWrote: string | null, clientAddress: string, init: { method?: 'GET' | 'POST'; headers?: Record<string, string>; payload?: string } = {}) =>
      t.app.fastify.inject({
        method: init.method ?? 'GET',
        url,
        remoteAddress: '10.0.0.2',
        headers: { ...init.headers, 'x-forwarded-for': clientWrote === null ? clientAddress : `${clientWrote}, ${clientAddress}` },
        payload: init.payload,
      });

    it('counts a client under the address the proxy saw, whatever it puts at the left of X-Forwarded-For', async () => {
      const limits: string[] = [];
      for (let i = 0; i < 10; i++) {
        const reply = await viaProxy(DISCOVERY, `198.51.100.${i}, 192.0.2.${i}`, '203.0.113.7');
        expect(reply.statusCode).toBe(200);
        limits.push(String(reply.headers.ratelimit));
      }
      expect(limits).toEqual(Array.from({ length: 10 }, (_, i) => expect.stringMatching(new RegExp(`^"oauth";r=${9 - i};t=\\d+$`))));
      const refused = await viaProxy(DISCOVERY, '198.51.100.77', '203.0.113.7');
      expect(refused.statusCode).toBe(429);
      expect(refused.headers['retry-after']).toMatch(/^\d+$/);
      expect(refused.json()).toEqual({ error: 'temporarily_unavailable', error_description: expect.stringMatching(/^Too many requests; retry in \d+ s\.$/) });
      // Another client behind the same proxy has its own budget, and so does the proxy itself.
      expect((await viaProxy(DISCOVERY, '203.0.113.7', '203.0.113.8')).headers.ratelimit).toMatch(/^"oauth";r=9;/);
      expect((await t.app.fastify.inject({ method: 'GET', url: DISCOVERY, remoteAddress: '10.0.0.2' })).headers.ratelimit).toMatch(/^"oauth";r=9;/);
    });

    it('throttles sign-in guesses under the address the proxy saw, whatever the client writes', async () => {
      const user = await t.createUser('member');
      const password = await user.password();
      const login = await viaProxy('/oauth/login', null, '203.0.113.20');
      const browserCookie = String([login.headers['set-cookie']].flat()[0]).split(';')[0]!;
      const csrf = /name="csrf_token" value="([^"]+)"/.exec(login.body)![1]!;
      const post = (forged: string, pass: string) =>
        viaProxy('/oauth/login', forged, '203.0.113.20', {
          method: 'POST',
          headers: { cookie: browserCookie, 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams({ csrf_token: csrf, email: user.email, password: pass }).toString(),
        });
      const guesses = await Promise.all(Array.from({ length: 7 }, (_, i) => post(`198.51.100.${i}`, `guess ${i}`)));
      expect(guesses.map((reply) => reply.statusCode).sort()).toEqual([401, 401, 401, 401, 401, 429, 429]);
      const right = await post('198.51.100.99', password);
      expect({ status: right.statusCode, retryAfter: Number(right.headers['retry-after']) > 800 }).toEqual({ status: 429, retryAfter: true });
    });
  });

  describe('as a list of proxy ranges (TRUST_PROXY=10.0.0.0/8)', () => {
    let t: TestApp;

    beforeAll(async () => {
      t = await startTestApp('sqlite', { TRUST_PROXY: '10.0.0.0/8', RATE_LIMIT_ANONYMOUS_MAX: '3' });
    });
    afterAll(() => t.close());

    const from = (peer: string, forwardedFor?: string) =>
      t.app.fastify.inject({ method: 'GET', url: DISCOVERY, remoteAddress: peer, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } });

    it('ignores X-Forwarded-For from a peer outside the list: it is counted under its own address', async () => {
      const replies = [];
      for (let i = 0; i < 4; i++) replies.push(await from('203.0.113.9', `198.51.100.${i}`));
      expect(replies.map((reply) => reply.statusCode)).toEqual([200, 200, 200, 429]);
      expect(replies.map((reply) => reply.headers.ratelimit)).toEqual([
        expect.stringMatching(/^"oauth";r=2;/),
        expect.stringMatching(/^"oauth";r=1;/),
        expect.stringMatching(/^"oauth";r=0;/),
        expect.stringMatching(/^"oauth";r=0;/),
      ]);
    });

    it('believes a listed proxy: each client it forwards has its own budget', async () => {
      for (let i = 0; i < 5; i++) {
        const reply = await from('10.1.2.3', `198.51.100.${i}`);
        expect({ status: reply.statusCode, limit: reply.headers.ratelimit }).toEqual({ status: 200, limit: expect.stringMatching(/^"oauth";r=2;/) });
      }
      // The same client through two listed proxies, with a forged entry at the left: still that client.
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await from('10.1.2.3', `192.0.2.${i}, 198.51.100.50, 10.9.9.9`)).statusCode);
      expect(statuses).toEqual([200, 200, 200, 429]);
    });
  });
});
