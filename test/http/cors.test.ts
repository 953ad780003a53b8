import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALLOWED_REQUEST_HEADERS, corsCovers, EXPOSED_RESPONSE_HEADERS } from '../../src/http/cors.js';
import { PACKAGE_ROOT } from '../../src/package-root.js';
import { ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET, startTestApp, type TestApp } from '../helpers/app.js';

// CORS (Fetch standard, "CORS protocol") on exact origins. It does not touch storage, so one database kind is enough.

const APP = 'https://app.example.com';
const DEV = 'http://127.0.0.1:5173';
const EXPOSE = 'ETag, Location, Link, Allow, RateLimit, RateLimit-Policy, Retry-After, WWW-Authenticate, Idempotent-Replayed, X-Request-Id, Deprecation, Sunset';
const ALLOW_HEADERS = 'Authorization, Content-Type, If-Match, If-None-Match, Idempotency-Key, traceparent';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const BASIC = `Basic ${Buffer.from(`${ADMIN_CLIENT_ID}:${ADMIN_CLIENT_SECRET}`).toString('base64')}`;

type Res = Awaited<ReturnType<TestApp['request']>>;

/** The response's CORS fields and Vary, the fields this suite is about. */
function corsOf(res: Res): Record<string, unknown> {
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => name.startsWith('access-control-') || name === 'vary'));
}

/** What a response to a listed origin carries on an actual (not preflight) request. */
function granted(origin: string, vary: string) {
  return { 'access-control-allow-origin': origin, 'access-control-expose-headers': EXPOSE, vary };
}

function preflight(t: TestApp, url: string, origin: string, method = 'GET', headers: Record<string, string> = {}): Promise<Res> {
  return t.request({ method: 'OPTIONS', url, headers: { origin, 'access-control-request-method': method, ...headers } });
}

function headerNames(res: Res): string[] {
  return Object.keys(res.headers).sort();
}

describe('CORS with CORS_ORIGINS set', () => {
  let t: TestApp;
  let token: string;
  let postId: string;

  beforeAll(async () => {
    t = await startTestApp('sqlite', { CORS_ORIGINS: `${APP},${DEV}` });
    const user = await t.createUser('member');
    token = await user.token();
    postId = (await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'T', body: 'B', status: 'published' } })).json().id;
  });
  afterAll(() => t.close());

  it('answers a listed origin on a REST GET with that origin, the readable headers and Vary: Origin', async () => {
    const res = await t.request({ url: '/v1/posts', token, headers: { origin: APP } });
    expect(res.statusCode).toBe(200);
    expect(headerNames(res)).toEqual([
      'access-control-allow-origin', 'access-control-expose-headers', 'cache-control', 'connection', 'content-length', 'content-type',
      'date', 'etag', 'ratelimit', 'ratelimit-policy', 'vary', 'x-content-type-options', 'x-request-id',
    ]);
    expect(corsOf(res)).toEqual(granted(APP, 'Authorization, Accept, Origin'));
    // Each listed origin is named for itself, never another one and never `*`.
    const dev = await t.request({ url: `/v1/posts/${postId}`, token, headers: { origin: DEV } });
    expect(dev.statusCode).toBe(200);
    expect(corsOf(dev)).toEqual(granted(DEV, 'Authorization, Accept, Origin'));
  });

  it('puts the headers on errors too, so a browser app can read the body', async () => {
    const cases: { res: Res; status: number; code: string }[] = [
      { res: await t.request({ url: '/v1/posts', headers: { origin: APP } }), status: 401, code: 'UNAUTHENTICATED' },
      { res: await t.request({ url: '/v1/posts/nope', token, headers: { origin: APP } }), status: 404, code: 'NOT_FOUND' },
      { res: await t.request({ method: 'PATCH', url: '/v1/posts', token, headers: { origin: APP } }), status: 405, code: 'METHOD_NOT_ALLOWED' },
      { res: await t.request({ url: '/v1/no-such-thing', headers: { origin: APP } }), status: 404, code: 'NOT_FOUND' },
      { res: await t.request({ url: '/v1/posts', token: 'not-a-token', headers: { origin: APP } }), status: 401, code: 'UNAUTHENTICATED' },
    ];
    for (const { res, status, code } of cases) {
      expect({ status: res.statusCode, code: res.json().error.code }).toEqual({ status, code });
      expect(res.headers['access-control-allow-origin']).toBe(APP);
      expect(res.headers['access-control-expose-headers']).toBe(EXPOSE);
      expect(String(res.headers.vary).split(', ')).toContain('Origin');
    }
    expect(cases[0]!.res.headers['www-authenticate']).toBe('Bearer realm="portcullis"');
  });

  it('answers a preflight from a listed origin: 204 with the methods the path has, no token needed', async () => {
    const res = await preflight(t, `/v1/posts/${postId}`, APP, 'PUT', { 'access-control-request-headers': 'authorization,content-type,if-match' });
    expect({ status: res.statusCode, body: res.body }).toEqual({ status: 204, body: '' });
    expect(headerNames(res)).toEqual([
      'access-control-allow-headers', 'access-control-allow-methods', 'access-control-allow-origin', 'access-control-max-age',
      'connection', 'date', 'ratelimit', 'ratelimit-policy', 'vary', 'x-content-type-options', 'x-request-id',
    ]);
    expect(corsOf(res)).toEqual({
      'access-control-allow-origin': APP,
      'access-control-allow-methods': 'GET, HEAD, PUT, PATCH, DELETE',
      'access-control-allow-headers': ALLOW_HEADERS,
      'access-control-max-age': '7200',
      vary: 'Origin',
    });
    expect(res.headers['ratelimit-policy']).toMatch(/^"anonymous";/);
    const collection = await preflight(t, '/v1/posts', DEV, 'POST');
    expect({ status: collection.statusCode, methods: collection.headers['access-control-allow-methods'], origin: collection.headers['access-control-allow-origin'] }).toEqual({
      status: 204,
      methods: 'GET, HEAD, POST',
      origin: DEV,
    });
  });

  it('refuses a preflight from an unlisted origin with 403 saying why, no CORS headers; a plain OPTIONS stays 405', async () => {
    const plain = await t.request({ method: 'OPTIONS', url: `/v1/posts/${postId}` });
    expect({ status: plain.statusCode, allow: plain.headers.allow, body: plain.json() }).toEqual({
      status: 405,
      allow: 'GET, HEAD, PUT, PATCH, DELETE',
      body: { error: { code: 'METHOD_NOT_ALLOWED', message: 'OPTIONS is not allowed here; use GET, HEAD, PUT, PATCH, DELETE.' } },
    });
    expect(corsOf(plain)).toEqual({ vary: 'Origin' });
    const refused = await preflight(t, `/v1/posts/${postId}`, 'https://evil.example', 'DELETE', { 'access-control-request-headers': 'authorization' });
    expect({ status: refused.statusCode, type: refused.headers['content-type'], body: refused.json() }).toEqual({
      status: 403,
      type: 'application/json; charset=utf-8',
      body: { error: { code: 'FORBIDDEN', message: 'This origin is not one CORS_ORIGINS lists, so a browser may not call the API from it.' } },
    });
    expect(corsOf(refused)).toEqual({ vary: 'Origin' });
    // A preflight to a path that does not exist is no permission either.
    const missing = await preflight(t, '/v1/no-such-thing', APP, 'GET');
    expect({ status: missing.statusCode, code: missing.json().error.code, methods: missing.headers['access-control-allow-methods'] }).toEqual({
      status: 404,
      code: 'NOT_FOUND',
      methods: undefined,
    });
  });

  it('refuses an origin that differs from a listed one in any way, and Origin: null', async () => {
    const lookalikes = [
      'https://app.example.com:8443', // port
      'http://app.example.com', // scheme
      'https://app.example.com/', // trailing slash
      'https://APP.example.com', // case of the host
      'https://app.example.com.evil.test', // suffix
      'https://evil.app.example.com', // subdomain
      'http://127.0.0.1:5174', // port of the loopback one
      'http://localhost:5173', // another name for the loopback one
      'null', // sandboxed documents, file: pages, redirects
      `${APP}, ${DEV}`, // two Origin fields joined
      '*',
    ];
    for (const origin of lookalikes) {
      const get = await t.request({ url: '/v1/posts', token, headers: { origin } });
      expect({ origin, status: get.statusCode, cors: corsOf(get) }).toEqual({ origin, status: 200, cors: { vary: 'Authorization, Accept, Origin' } });
      const pre = await preflight(t, '/v1/posts', origin, 'POST');
      expect({ origin, status: pre.statusCode, cors: corsOf(pre) }).toEqual({ origin, status: 403, cors: { vary: 'Origin' } });
    }
  });

  it('covers the token endpoint: a form POST from a listed origin, its errors and its preflight', async () => {
    const issued = await t.request({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...FORM, authorization: BASIC, origin: APP },
      payload: 'grant_type=client_credentials&scope=read%3Aposts',
    });
    expect({ status: issued.statusCode, type: issued.json().token_type }).toEqual({ status: 200, type: 'Bearer' });
    expect(corsOf(issued)).toEqual(granted(APP, 'Origin'));

    const refused = await t.request({
      method: 'POST',
      url: '/oauth/token',
      headers: { ...FORM, origin: APP },
      payload: `grant_type=client_credentials&client_id=${ADMIN_CLIENT_ID}&client_secret=wrong`,
    });
    expect({ status: refused.statusCode, error: refused.json().error }).toEqual({ status: 401, error: 'invalid_client' });
    expect(corsOf(refused)).toEqual(granted(APP, 'Origin'));

    const pre = await preflight(t, '/oauth/token', APP, 'POST', { 'access-control-request-headers': 'authorization' });
    expect({ status: pre.statusCode, cors: corsOf(pre) }).toEqual({
      status: 204,
      cors: {
        'access-control-allow-origin': APP,
        'access-control-allow-methods': 'POST',
        'access-control-allow-headers': ALLOW_HEADERS,
        'access-control-max-age': '7200',
        vary: 'Origin',
      },
    });
  });

  it('covers revocation, the JWKS and the discovery document', async () => {
    const responses = [
      await t.request({ method: 'POST', url: '/oauth/revoke', headers: { ...FORM, authorization: BASIC, origin: APP }, payload: 'token=not-a-token' }),
      await t.request({ url: '/oauth/jwks', headers: { origin: APP } }),
      await t.request({ url: '/.well-known/jwks.json', headers: { origin: APP } }),
      await t.request({ url: '/.well-known/oauth-authorization-server', headers: { origin: APP } }),
    ];
    for (const res of responses) {
      expect(res.statusCode).toBe(200);
      expect(corsOf(res)).toEqual(granted(APP, 'Origin'));
    }
    // Without an Origin (a same-origin or non-browser request) nothing is granted, but caches still learn
    // that the answer depends on Origin.
    expect(corsOf(await t.request({ url: '/oauth/jwks' }))).toEqual({ vary: 'Origin' });
  });

  it('covers POST /graphql: its preflight, a query and a refusal, but not the GraphiQL page', async () => {
    const pre = await preflight(t, '/graphql', APP, 'POST', { 'access-control-request-headers': 'authorization,content-type' });
    expect({ status: pre.statusCode, body: pre.body }).toEqual({ status: 204, body: '' });
    expect(corsOf(pre)).toEqual({
      'access-control-allow-origin': APP,
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers': ALLOW_HEADERS,
      'access-control-max-age': '7200',
      vary: 'Origin',
    });
    const query = await t.request({ method: 'POST', url: '/graphql', token, headers: { origin: APP }, body: { query: `{ post(id: "${postId}") { title } }` } });
    expect({ status: query.statusCode, body: query.json() }).toEqual({ status: 200, body: { data: { post: { title: 'T' } } } });
    expect(corsOf(query)).toEqual(granted(APP, 'Origin'));
    const refused = await t.request({ method: 'POST', url: '/graphql', headers: { origin: APP }, body: { query: '{ posts(first: 1) { nodes { id } } }' } });
    expect(refused.statusCode).toBe(401);
    expect(corsOf(refused)).toEqual(granted(APP, 'Origin'));
    // A form post stays refused (the CSRF defence does not depend on CORS).
    const form = await t.request({ method: 'POST', url: '/graphql', token, headers: { origin: APP, 'content-type': 'application/x-www-form-urlencoded' }, payload: 'query=%7B__typename%7D' });
    expect(form.statusCode).toBe(415);
    const page = await preflight(t, '/graphiql', APP, 'GET');
    expect(page.statusCode).not.toBe(204);
    expect(corsOf(page)['access-control-allow-origin']).toBeUndefined();
  });

  it('leaves the HTML pages, introspection, device authorization, health and unprefixed paths out', async () => {
    const outside = [
      '/oauth/authorize', '/oauth/login', '/oauth/consent', '/oauth/device', '/oauth/account', '/oauth/logout',
      '/oauth/introspect', '/oauth/device_authorization', '/oauth/tokens', '/healthz', '/posts',
    ];
    for (const url of outside) {
      const get = await t.request({ url, headers: { origin: APP } });
      expect({ url, cors: corsOf(get) }).toEqual({ url, cors: expect.not.objectContaining({ 'access-control-allow-origin': APP }) });
      expect({ url, vary: String(get.headers.vary ?? '') }).toEqual({ url, vary: expect.not.stringContaining('Origin') });
      const pre = await preflight(t, url, APP, 'POST');
      expect({ url, preflight: pre.statusCode === 204, cors: Object.keys(corsOf(pre)).filter((n) => n !== 'vary') }).toEqual({ url, preflight: false, cors: [] });
      if (pre.statusCode === 403) {
        expect({ url, body: pre.json() }).toEqual({ url, body: { error: { code: 'FORBIDDEN', message: 'This endpoint cannot be called from another origin.' } } });
      }
    }
    // The decision is the path's, so pages added later stay out and the listed endpoints stay in.
    for (const page of ['/oauth/authorize', '/oauth/login', '/oauth/consent', '/oauth/device', '/oauth/account', '/oauth/logout', '/oauth/introspect']) {
      expect({ page, covered: corsCovers(page) }).toEqual({ page, covered: false });
    }
    const endpoints = [
      '/v1/posts', '/oauth/token', '/oauth/revoke', '/oauth/userinfo', '/oauth/jwks', '/.well-known/jwks.json',
      '/.well-known/oauth-authorization-server', '/.well-known/openid-configuration', '/graphql',
    ];
    for (const endpoint of endpoints) {
      expect({ endpoint, covered: corsCovers(endpoint) }).toEqual({ endpoint, covered: true });
    }
  });
});

describe('CORS without CORS_ORIGINS', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('sqlite');
  });
  afterAll(() => t.close());

  it('grants no origin, adds no Vary: Origin, and refuses a preflight saying CORS is off', async () => {
    const token = await (await t.createUser('member')).token();
    const get = await t.request({ url: '/v1/posts', token, headers: { origin: APP } });
    expect({ status: get.statusCode, cors: corsOf(get) }).toEqual({ status: 200, cors: { vary: 'Authorization, Accept' } });
    const jwks = await t.request({ url: '/oauth/jwks', headers: { origin: APP } });
    expect({ status: jwks.statusCode, cors: corsOf(jwks) }).toEqual({ status: 200, cors: {} });
    const pre = await preflight(t, '/v1/posts', APP, 'POST');
    expect({ status: pre.statusCode, body: pre.json(), cors: corsOf(pre) }).toEqual({
      status: 403,
      body: { error: { code: 'FORBIDDEN', message: 'Cross-origin requests are off on this server (CORS_ORIGINS is not set).' } },
      cors: {},
    });
  });
});

describe('CORS preflights and rate limits', () => {
  it('spend the address’s anonymous budget, not a client’s, and a 429 still names the origin', async () => {
    const t = await startTestApp('sqlite', { CORS_ORIGINS: APP, RATE_LIMIT_MAX: '5', RATE_LIMIT_ANONYMOUS_MAX: '3', RATE_LIMIT_WINDOW: '86400' });
    try {
      const token = await (await t.createUser('member')).token();
      for (let remaining = 2; remaining >= 0; remaining--) {
        const res = await preflight(t, '/v1/posts', APP, 'POST');
        expect({ status: res.statusCode, limit: res.headers.ratelimit }).toEqual({ status: 204, limit: expect.stringMatching(new RegExp(`^"anonymous";r=${remaining};`)) });
      }
      const limited = await preflight(t, '/v1/posts', APP, 'POST');
      expect({ status: limited.statusCode, code: limited.json().error.code, retryAfter: typeof limited.headers['retry-after'] }).toEqual({
        status: 429,
        code: 'RATE_LIMITED',
        retryAfter: 'string',
      });
      // A failed preflight from a listed origin names it (the browser then reports the status, not a CORS
      // error); Access-Control-Expose-Headers is for actual requests only.
      expect(corsOf(limited)).toEqual({ 'access-control-allow-origin': APP, vary: 'Origin' });
      // The client's own budget is untouched by the preflights.
      const get = await t.request({ url: '/v1/posts', token, headers: { origin: APP } });
      expect({ status: get.statusCode, limit: get.headers.ratelimit }).toEqual({ status: 200, limit: expect.stringMatching(/^"client";r=4;/) });
    } finally {
      await t.close();
    }
  });
});

describe('CORS header lists and the contract', () => {
  const published = JSON.parse(fs.readFileSync(`${PACKAGE_ROOT}/generated/openapi.json`, 'utf8'));
  const lower = (names: readonly string[]) => names.map((name) => name.toLowerCase());

  it('allows every request header the contract declares', () => {
    const declared = new Set<string>();
    const visit = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(visit);
      else if (node && typeof node === 'object') {
        const record = node as Record<string, unknown>;
        if (record.in === 'header' && typeof record.name === 'string') declared.add(record.name.toLowerCase());
        Object.values(record).forEach(visit);
      }
    };
    visit(published);
    expect(declared.size).toBeGreaterThan(0);
    expect(lower(ALLOWED_REQUEST_HEADERS)).toEqual(expect.arrayContaining([...declared, 'authorization', 'content-type']));
  });

  it('exposes every response header the contract declares beyond the CORS-safelisted ones', () => {
    // Fetch standard: CORS-safelisted response-header names are readable without being exposed.
    const safelisted = ['cache-control', 'content-language', 'content-length', 'content-type', 'expires', 'last-modified', 'pragma'];
    // The names responses declare their headers under (a component's key is only its name in the document).
    const named = new Set<string>();
    for (const item of Object.values(published.paths) as Record<string, { responses?: Record<string, { headers?: Record<string, unknown> }> }>[]) {
      for (const operation of Object.values(item)) {
        for (const response of Object.values(operation.responses ?? {})) for (const name of Object.keys(response.headers ?? {})) named.add(name);
      }
    }
    for (const response of Object.values(published.components.responses) as { headers?: Record<string, unknown> }[]) {
      for (const name of Object.keys(response.headers ?? {})) named.add(name);
    }
    const declared = [...named].map((name) => name.toLowerCase()).filter((name) => !safelisted.includes(name) && !name.startsWith('access-control-'));
    expect(declared.length).toBeGreaterThan(0);
    expect(lower(EXPOSED_RESPONSE_HEADERS)).toEqual(expect.arrayContaining(declared));
  });
});
