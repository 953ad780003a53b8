import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';

const SDL = fs.readFileSync('schema.graphql', 'utf8');

describe('GET /v1/graphql (the SDL, gated like introspection)', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  it('needs the read:schema scope by default', async () => {
    t = await startTestApp('sqlite');
    const anonymous = await t.request({ url: '/v1/graphql' });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json()).toEqual({ error: { code: 'UNAUTHENTICATED', message: 'Authentication is required.' } });
    const member = await t.createUser('member');
    const withoutScope = await t.request({ url: '/v1/graphql', token: await member.token(['read:posts']) });
    expect(withoutScope.statusCode).toBe(403);
    expect(withoutScope.headers['www-authenticate']).toBe('Bearer realm="portcullis", error="insufficient_scope", scope="read:schema"');
    const ok = await t.request({ url: '/v1/graphql', token: await member.token(['read:schema']) });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(ok.body).toBe(SDL);
  });

  it('is public when GRAPHQL_INTROSPECTION_PUBLIC=true', async () => {
    t = await startTestApp('sqlite', { GRAPHQL_INTROSPECTION_PUBLIC: 'true' });
    const anonymous = await t.request({ url: '/v1/graphql' });
    expect(anonymous.statusCode).toBe(200);
    expect(anonymous.body).toBe(SDL);
    expect(anonymous.headers['cache-control']).toBe('public, no-cache');
  });
});
