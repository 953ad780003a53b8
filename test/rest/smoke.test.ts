import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

describe.each(DATABASE_KINDS)('REST smoke on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('creates and reads a post with the admin client token', async () => {
    const token = await t.adminClientToken();
    const created = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'Hello', body: 'World', status: 'published' } });
    expect(created.statusCode).toBe(201);
    const post = created.json();
    expect(created.headers.location).toBe(`/v1/posts/${post.id}`);
    const read = await t.request({ url: `/v1/posts/${post.id}`, token });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual(post);
    expect(read.headers.etag).toMatch(/^".+"$/);
    const list = await t.request({ url: '/v1/posts', token });
    expect(list.statusCode).toBe(200);
    expect(list.json()).toEqual({ data: [post], page: { limit: 20, next: null } });
  });
});
