import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../../generated/routes.js';
import { GENERATED_API } from '../../src/app.js';
import { createPost } from '../access/support.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

// listPosts stands in for a deprecated collection (the contract has no deprecated operation today), with the
// headers codegen renders for it.
const DEPRECATION_LINK = '</docs#operation/listPosts>; rel="deprecation"; type="text/html"';
const DEPRECATED_LIST_POSTS = {
  ...GENERATED_API,
  routes: routes.map((route) =>
    route.operationId === 'listPosts'
      ? { ...route, deprecated: true, deprecationHeaders: { deprecation: '@1767225600', sunset: 'Fri, 01 Jan 2027 00:00:00 GMT', link: DEPRECATION_LINK } }
      : route,
  ),
};

describe('a deprecated collection', () => {
  let t: TestApp;
  let token: string;

  beforeAll(async () => {
    t = await startTestApp('sqlite', {}, { api: DEPRECATED_LIST_POSTS });
    token = await (await t.createUser('member')).token();
    for (const title of ['one', 'two']) await createPost(t, token, { title, status: 'published' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('sends its deprecation link beside the next page\'s, in one Link field', async () => {
    const first = await t.request({ url: '/v1/posts?limit=1', token });
    expect(first.statusCode).toBe(200);
    const next = (first.json() as { page: { next: string } }).page.next;
    expect(typeof next).toBe('string');
    expect({ deprecation: first.headers.deprecation, sunset: first.headers.sunset, link: first.headers.link }).toEqual({
      deprecation: '@1767225600',
      sunset: 'Fri, 01 Jan 2027 00:00:00 GMT',
      link: `</v1/posts?limit=1&after=${encodeURIComponent(next)}>; rel="next", ${DEPRECATION_LINK}`,
    });
    // The last page has no next link: the deprecation link alone.
    const last = await t.request({ url: `/v1/posts?limit=1&after=${encodeURIComponent(next)}`, token });
    expect({ status: last.statusCode, link: last.headers.link }).toEqual({ status: 200, link: DEPRECATION_LINK });
  });
});
