import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

// A client registered with its own `rateLimit` is judged against it instead of RATE_LIMIT_MAX: its own
// client-credentials tokens, and its users' (which draw on the user's budget too).

describe.each(DATABASE_KINDS)('a client\'s own rate limit on %s', (kind) => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000', RATE_LIMIT_ADDRESS_MAX: '100000', RATE_LIMIT_ANONYMOUS_MAX: '100000' });
    admin = await t.adminClientToken('read:clients write:clients');
  });
  afterAll(() => t.close());

  async function register(rateLimit: number | null | undefined): Promise<{ id: string; clientId: string; secret: string; body: Record<string, unknown> }> {
    const res = await t.request({
      method: 'POST',
      url: '/v1/clients',
      token: admin,
      body: { name: 'Limited', type: 'confidential', grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member', ...(rateLimit === undefined ? {} : { rateLimit }) },
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    return { id: body.id, clientId: body.clientId, secret: body.clientSecret, body };
  }

  async function tokenOf(client: { clientId: string; secret: string }): Promise<string> {
    const res = await t.request({
      method: 'POST',
      url: '/oauth/token',
      headers: { authorization: `Basic ${Buffer.from(`${client.clientId}:${client.secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'grant_type=client_credentials&scope=read%3Aposts',
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().access_token;
  }

  it('refuses the request over the client\'s own budget with 429, and says the budget in RateLimit-Policy', async () => {
    const client = await register(3);
    expect(client.body.rateLimit).toBe(3);
    const token = await tokenOf(client);
    for (let i = 1; i <= 3; i++) {
      const res = await t.request({ url: '/v1/posts?limit=1', token });
      expect(res.statusCode).toBe(200);
      expect(res.headers['ratelimit-policy']).toBe('"client";q=3;w=60');
      expect(res.headers.ratelimit).toMatch(new RegExp(`^"client";r=${3 - i};t=\\d+$`));
    }
    const refused = await t.request({ url: '/v1/posts?limit=1', token });
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({ error: { code: 'RATE_LIMITED', message: expect.stringMatching(/^Too many requests; retry in \d+ s\.$/) } });
    expect(refused.headers['retry-after']).toMatch(/^\d+$/);
    expect(refused.headers['ratelimit-policy']).toBe('"client";q=3;w=60');

    // Raised through the API: the registration is read again at once, the spending counted so far stays.
    const patched = await t.request({ method: 'PATCH', url: `/v1/clients/${client.id}`, token: admin, headers: { 'content-type': 'application/merge-patch+json' }, body: { rateLimit: 6 } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().rateLimit).toBe(6);
    const again = await t.request({ url: '/v1/posts?limit=1', token });
    expect(again.statusCode).toBe(200);
    expect(again.headers['ratelimit-policy']).toBe('"client";q=6;w=60');
    expect(again.headers.ratelimit).toMatch(/^"client";r=1;t=\d+$/);

    // Back to the server's budget: null.
    const reset = await t.request({ method: 'PATCH', url: `/v1/clients/${client.id}`, token: admin, headers: { 'content-type': 'application/merge-patch+json' }, body: { rateLimit: null } });
    expect(reset.json().rateLimit).toBeNull();
    expect((await t.request({ url: '/v1/posts?limit=1', token })).headers['ratelimit-policy']).toBe('"client";q=1000;w=60');
  });

  it('keeps the server\'s budget for a client registered without one, and PUT without rateLimit resets it', async () => {
    const client = await register(undefined);
    expect(client.body.rateLimit).toBeNull();
    const token = await tokenOf(client);
    expect((await t.request({ url: '/v1/posts?limit=1', token })).headers['ratelimit-policy']).toBe('"client";q=1000;w=60');
    const limited = await register(2);
    const { id: _id, clientId: _clientId, createdAt: _createdAt, clientSecret: _secret, rateLimit: _rateLimit, ...rest } = limited.body;
    const put = await t.request({ method: 'PUT', url: `/v1/clients/${limited.id}`, token: admin, body: rest });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().rateLimit).toBeNull();
  });

  it('refuses a rateLimit below 1 or above 1,000,000, or not an integer', async () => {
    for (const rateLimit of [0, 1_000_001, 2.5, '10']) {
      const res = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token: admin,
        body: { name: 'Bad', type: 'confidential', grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member', rateLimit },
      });
      expect(res.statusCode, JSON.stringify(rateLimit)).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
      expect(res.json().error.details[0].path).toBe('/body/rateLimit');
    }
  });
});

// A user's token draws on the user's budget and the client's; the client's is shared by the client's users.
describe.each(DATABASE_KINDS)('one user past their own budget on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '5', RATE_LIMIT_USER_MAX: '3', RATE_LIMIT_ADDRESS_MAX: '100000', RATE_LIMIT_ANONYMOUS_MAX: '100000' });
  });
  afterAll(() => t.close());

  it('spends only their own budget on the requests it refuses, not the budget the client\'s other users share', async () => {
    const greedy = await t.createUser('member');
    const other = await t.createUser('member');
    const greedyToken = await greedy.token(['read:posts']);
    const answers: string[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await t.request({ url: '/v1/posts?limit=1', token: greedyToken });
      answers.push(`${res.statusCode} ${res.headers.ratelimit}`);
    }
    // The user's budget (3) refuses from the fourth request on, and says so; the client's (5) kept 2.
    expect(answers.map((answer) => answer.replace(/;t=\d+$/, ''))).toEqual([
      '200 "user";r=2',
      '200 "user";r=1',
      '200 "user";r=0',
      ...Array(5).fill('429 "user";r=0'),
    ]);
    const res = await t.request({ url: '/v1/posts?limit=1', token: await other.token(['read:posts']) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['ratelimit-policy']).toBe('"client";q=5;w=60');
    expect(res.headers.ratelimit).toMatch(/^"client";r=1;t=\d+$/);
  });
});
