import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const CONTRACT_MISMATCH = 'The request does not match the contract.';
const CURSOR = /^[A-Za-z0-9_-]+$/;

type Res = Awaited<ReturnType<TestApp['request']>>;
type Post = { id: string; authorId: string; title: string; body: string; status: string; createdAt: string; updatedAt: string };

function expectValidationFailed(res: Res, message: string, details: { path: string; message: string }[]) {
  expect({ status: res.statusCode, type: res.headers['content-type'], body: res.json() }).toEqual({
    status: 400,
    type: JSON_TYPE,
    body: { error: { code: 'VALIDATION_FAILED', message, details } },
  });
}

function cursorOf(payload: unknown): string {
  return Buffer.from(JSON.stringify(payload)).toString('base64url');
}

describe.each(DATABASE_KINDS)('REST collections (paging) on %s', (kind) => {
  let t: TestApp;
  let token: string;

  beforeAll(async () => {
    t = await startTestApp(kind);
    const editor = await t.createUser('editor');
    token = await editor.token();
    for (let i = 1; i <= 45; i++) {
      await createPost(`Post ${i}`, i % 3 === 0 ? 'draft' : 'published');
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  async function createPost(title: string, status: 'draft' | 'published' = 'published'): Promise<Post> {
    const res = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title, body: `${title} body`, status } });
    expect(res.statusCode).toBe(201);
    return res.json();
  }

  /** Every post, in creation (id) order, read straight from the database in the contract's shape. */
  async function allPosts(where: { status?: string } = {}): Promise<Post[]> {
    let query = t.app.db.kysely.selectFrom('posts').selectAll().orderBy('id');
    if (where.status) query = query.where('status', '=', where.status);
    return (await query.execute()).map((r) => ({
      id: r.id,
      authorId: r.authorId,
      title: r.title,
      body: r.body,
      status: r.status,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt,
    }));
  }

  it('uses limit 20 by default and returns the first page in creation order with a next cursor and a Link', async () => {
    const posts = await allPosts();
    const res = await t.request({ url: '/v1/posts', token });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({ data: posts.slice(0, 20), page: { limit: 20, next: expect.stringMatching(CURSOR) } });
    expect(res.headers.link).toBe(`</v1/posts?after=${body.page.next}>; rel="next"`);

    const following = await t.request({ url: '/v1/posts?after=' + body.page.next, token });
    expect(following.json()).toEqual({ data: posts.slice(20, 40), page: { limit: 20, next: expect.stringMatching(CURSOR) } });
  });

  it('accepts limit up to 100; 101 and 0 are 400 naming /query/limit', async () => {
    const posts = await allPosts();
    expect(posts.length).toBeLessThanOrEqual(100);
    const all = await t.request({ url: '/v1/posts?limit=100', token });
    expect(all.statusCode).toBe(200);
    expect(all.json()).toEqual({ data: posts, page: { limit: 100, next: null } });
    expect(all.headers.link).toBeUndefined();

    const one = await t.request({ url: '/v1/posts?limit=1', token });
    expect(one.json()).toEqual({ data: posts.slice(0, 1), page: { limit: 1, next: expect.stringMatching(CURSOR) } });

    expectValidationFailed(await t.request({ url: '/v1/posts?limit=101', token }), CONTRACT_MISMATCH, [
      { path: '/query/limit', message: 'must be <= 100' },
    ]);
    expectValidationFailed(await t.request({ url: '/v1/posts?limit=0', token }), CONTRACT_MISMATCH, [
      { path: '/query/limit', message: 'must be >= 1' },
    ]);
    expectValidationFailed(await t.request({ url: '/v1/users?limit=101', token }), CONTRACT_MISMATCH, [
      { path: '/query/limit', message: 'must be <= 100' },
    ]);
  });

  it('pages by offset with page (1-based); the last page has next null and no Link', async () => {
    const posts = await allPosts();
    expect(posts.length).toBe(45);
    const page2 = await t.request({ url: '/v1/posts?limit=10&page=2', token });
    expect(page2.statusCode).toBe(200);
    const body2 = page2.json();
    expect(body2).toEqual({ data: posts.slice(10, 20), page: { limit: 10, next: expect.stringMatching(CURSOR) } });
    // The Link continues with the cursor; the offset is dropped so the two cannot disagree.
    expect(page2.headers.link).toBe(`</v1/posts?limit=10&after=${body2.page.next}>; rel="next"`);
    const viaLink = await t.request({ url: String(page2.headers.link).slice(1, String(page2.headers.link).indexOf('>')), token });
    expect(viaLink.json()).toEqual({ data: posts.slice(20, 30), page: { limit: 10, next: expect.stringMatching(CURSOR) } });

    const last = await t.request({ url: '/v1/posts?limit=10&page=5', token });
    expect(last.json()).toEqual({ data: posts.slice(40, 45), page: { limit: 10, next: null } });
    expect(last.headers.link).toBeUndefined();

    const exact = await t.request({ url: '/v1/posts?limit=15&page=3', token });
    expect(exact.json()).toEqual({ data: posts.slice(30, 45), page: { limit: 15, next: null } });
    expect(exact.headers.link).toBeUndefined();

    const beyond = await t.request({ url: '/v1/posts?limit=10&page=6', token });
    expect(beyond.json()).toEqual({ data: [], page: { limit: 10, next: null } });
    expect(beyond.headers.link).toBeUndefined();

    expectValidationFailed(await t.request({ url: '/v1/posts?page=0', token }), CONTRACT_MISMATCH, [
      { path: '/query/page', message: 'must be >= 1' },
    ]);
  });

  it('keeps filters in the Link and sends Link exactly when page.next is not null', async () => {
    const published = await allPosts({ status: 'published' });
    expect(published.length).toBe(30);
    let url: string | null = '/v1/posts?status=published&limit=8';
    const seen: Post[] = [];
    let pages = 0;
    while (url !== null) {
      const res: Res = await t.request({ url, token });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      seen.push(...body.data);
      pages++;
      if (body.page.next === null) {
        expect(res.headers.link).toBeUndefined();
        url = null;
      } else {
        expect(res.headers.link).toBe(`</v1/posts?status=published&limit=8&after=${body.page.next}>; rel="next"`);
        url = String(res.headers.link).slice(1, String(res.headers.link).indexOf('>'));
      }
      expect(pages).toBeLessThanOrEqual(4);
    }
    expect(pages).toBe(4);
    expect(seen).toEqual(published);
  });

  it('lets after win over page when both are given (the contract says so)', async () => {
    const posts = await allPosts();
    const first = (await t.request({ url: '/v1/posts?limit=10', token })).json();
    const res = await t.request({ url: `/v1/posts?limit=10&page=3&after=${first.page.next}`, token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: posts.slice(10, 20), page: { limit: 10, next: expect.stringMatching(CURSOR) } });
    expect(res.headers.link).toBe(`</v1/posts?limit=10&after=${res.json().page.next}>; rel="next"`);
  });

  it('rejects a cursor that this API did not issue with 400 VALIDATION_FAILED', async () => {
    for (const after of [
      'garbage',
      cursorOf({ id: 'x' }),
      cursorOf([2, 'x']),
      cursorOf([1, 42]),
      cursorOf([1, 'x'.repeat(65)]),
      cursorOf([1, '']),
      cursorOf([1, "' OR 1=1 --"]),
      cursorOf('x'),
      Buffer.from('not json').toString('base64url'),
    ]) {
      expectValidationFailed(await t.request({ url: `/v1/posts?after=${after}`, token }), 'The cursor is not valid.', [
        { path: '/query/after', message: 'is not a cursor from this API' },
      ]);
    }
    expectValidationFailed(await t.request({ url: '/v1/posts?after=not%2Bbase64%2F', token }), CONTRACT_MISMATCH, [
      { path: '/query/after', message: 'must match pattern "^[A-Za-z0-9._~-]+$"' },
    ]);
  });

  it('walks a collection by cursor while posts are inserted and deleted: no row skipped or repeated', async () => {
    const initial = (await allPosts()).map((p) => p.id);
    expect(initial.length).toBeGreaterThanOrEqual(45);
    const seen: string[] = [];
    const inserted: string[] = [];
    let url: string | null = '/v1/posts?limit=10';
    for (let round = 0; url !== null; round++) {
      expect(round).toBeLessThan(20);
      const res: Res = await t.request({ url, token });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      seen.push(...body.data.map((p: Post) => p.id));
      if (body.page.next === null) {
        expect(res.headers.link).toBeUndefined();
        url = null;
        break;
      }
      expect(res.headers.link).toBe(`</v1/posts?limit=10&after=${body.page.next}>; rel="next"`);
      // Between two page fetches: a new post arrives, and a post already seen is deleted. With offset
      // paging the deletion would shift the next page by one and skip a row.
      inserted.push((await createPost(`Inserted ${round}`)).id);
      const seenPost = seen[seen.length - 1]!;
      expect((await t.request({ method: 'DELETE', url: `/v1/posts/${seenPost}`, token })).statusCode).toBe(204);
      url = `/v1/posts?limit=10&after=${body.page.next}`;
    }
    expect(seen).toEqual([...initial, ...inserted]);
    expect(new Set(seen).size).toBe(seen.length);
  });
});
