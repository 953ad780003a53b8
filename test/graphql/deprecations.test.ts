import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { routes } from '../../generated/routes.js';
import { buildApp, GENERATED_API, type App } from '../../src/app.js';
import { configFrom } from '../../src/config/config.js';
import { ADMIN_CLIENT_ID, startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { createPost, type PostView } from '../access/support.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

// getPost stands in for a deprecated REST operation (the contract has none deprecated today), with the
// headers codegen renders for `deprecated: true`, `x-deprecated-since`, `x-sunset` and `x-replaced-by`.
const DEPRECATION_HEADERS = {
  deprecation: '@1767225600',
  sunset: 'Fri, 01 Jan 2027 00:00:00 GMT',
  link: '</docs#operation/listPosts>; rel="deprecation"; type="text/html"',
};
const DEPRECATED_GET_POST = {
  ...GENERATED_API,
  routes: routes.map((route) =>
    route.operationId === 'getPost' ? { ...route, deprecated: true, deprecationHeaders: DEPRECATION_HEADERS } : route,
  ),
};

describe.each(DATABASE_KINDS)('uses of deprecated operations and fields, GET /v1/deprecations, on %s', (kind) => {
  let t: TestApp;
  let second: App;
  let member: TestUser;
  let token: string;
  let post: PostView;

  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000' }, { api: DEPRECATED_GET_POST });
    // Another instance on the same database, counting on its own.
    second = await buildApp(
      configFrom({
        DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-test-')),
        ISSUER: 'http://127.0.0.1:3000',
        KEY_ENCRYPTION_SECRET: 'test-key-encryption-secret-0123456789abcdef',
        RATE_LIMIT_MAX: '1000000',
      }),
      { db: t.database.db, api: DEPRECATED_GET_POST },
    );
    member = await t.createUser('member');
    token = await member.token();
    post = await createPost(t, token, { title: 'counted', status: 'published' });
  });
  afterAll(async () => {
    await second?.close();
    await t?.close();
  });

  it('counts per client what every instance served, and lists it to readers of the audit log', async () => {
    const query = { query: `{ post(id: "${post.id}") { id published } }` };
    for (const app of [t.app, second, second]) {
      const res = await app.fastify.inject({ method: 'POST', url: '/graphql', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, payload: JSON.stringify(query) });
      expect(res.statusCode, res.body).toBe(200);
    }
    // A field that is not deprecated counts nothing; neither does a refused request.
    await t.request({ method: 'POST', url: '/graphql', token, body: { query: `{ post(id: "${post.id}") { id status } }` } });
    await t.request({ method: 'POST', url: '/graphql', body: query });
    for (let i = 0; i < 2; i++) {
      const res = await t.request({ url: `/v1/posts/${post.id}`, token });
      expect(res.statusCode).toBe(200);
      expect({ deprecation: res.headers.deprecation, sunset: res.headers.sunset, link: res.headers.link }).toEqual(DEPRECATION_HEADERS);
    }
    // Refusals of the operation carry the notice too (a client that only ever sees errors still learns of it).
    const missing = await t.request({ url: '/v1/posts/00000000000000000000000000000000', token });
    expect({ status: missing.statusCode, deprecation: missing.headers.deprecation, sunset: missing.headers.sunset, link: missing.headers.link }).toEqual({ status: 404, ...DEPRECATION_HEADERS });
    expect((await second.fastify.inject({ url: `/v1/posts/${post.id}`, headers: { authorization: `Bearer ${token}` } })).statusCode).toBe(200);
    // Allowed, then refused as invalid: not a use.
    const invalid = await t.request({ url: `/v1/posts/${post.id}?expand=nothing`, token });
    expect({ status: invalid.statusCode, deprecation: invalid.headers.deprecation }).toEqual({ status: 400, deprecation: DEPRECATION_HEADERS.deprecation });

    const admin = await (await t.createUser('admin')).token(['read:audit']);
    const listed = await vi.waitFor(
      async () => {
        const res = await t.request({ url: '/v1/deprecations', token: admin });
        expect(res.statusCode, res.body).toBe(200);
        const body = res.json();
        const uses = Object.fromEntries(body.data.map((row: { interface: string; name: string; uses: number }) => [`${row.interface} ${row.name}`, row.uses]));
        expect(uses).toEqual({ 'graphql Post.published': 3, 'rest getPost': 3 });
        return body;
      },
      { timeout: 5000, interval: 100 },
    );
    expect(listed.page).toEqual({ limit: 20, next: null });
    for (const row of listed.data) {
      expect(row).toEqual({ id: expect.any(String), clientId: ADMIN_CLIENT_ID, interface: row.interface, name: row.name, uses: 3, firstUsedAt: expect.any(String), lastUsedAt: expect.any(String) });
      expect(row.firstUsedAt <= row.lastUsedAt).toBe(true);
    }
  });

  it('is for readers of the audit log only', async () => {
    const res = await t.request({ url: '/v1/deprecations', token: await member.token(['read:posts']) });
    expect({ status: res.statusCode, code: res.json().error.code }).toEqual({ status: 403, code: 'INSUFFICIENT_SCOPE' });
    const memberWithScope = await t.request({ url: '/v1/deprecations', token: await member.token(['read:audit']) });
    expect({ status: memberWithScope.statusCode, code: memberWithScope.json().error.code }).toEqual({ status: 403, code: 'FORBIDDEN' });
    expect((await t.request({ url: '/v1/deprecations' })).statusCode).toBe(401);
  });
});
