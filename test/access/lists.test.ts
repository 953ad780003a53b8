import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_KINDS } from '../helpers/databases.js';
import type { TestApp, TestUser } from '../helpers/app.js';
import { NOT_FOUND, REALM, UNAUTHENTICATED, createPost, expectError, expectPrivateJson, readUser, startAccessApp, type PostView } from './support.js';

describe.each(DATABASE_KINDS)('lists are filtered by the policy in the database on %s', (kind) => {
  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;
  let carol: TestUser;
  let editor: TestUser;

  beforeAll(async () => {
    t = await startAccessApp(kind);
    alice = await t.createUser('member');
    bob = await t.createUser('member');
    carol = await t.createUser('member');
    editor = await t.createUser('editor');
    const tokens = new Map<string, string>();
    for (const user of [alice, bob, carol]) tokens.set(user.id, await user.token());
    // 60 posts, interleaved; most of bob's and carol's are drafts, so a page filtered after the fact
    // (instead of in the query) would come back short.
    for (let i = 0; i < 60; i++) {
      const author = [alice, bob, carol][i % 3]!;
      const status = author === alice ? (i % 2 === 0 ? 'draft' : 'published') : i % 4 === 1 ? 'published' : 'draft';
      await createPost(t, tokens.get(author.id)!, { title: `post ${i}`, body: `body ${i}`, status });
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The oracle: every post, in id order, with seed rule "drafts only to their author, editors, admins". */
  async function allPosts(): Promise<PostView[]> {
    return (await t.database.db.kysely
      .selectFrom('posts')
      .select(['id', 'authorId', 'title', 'body', 'status', 'createdAt', 'updatedAt'])
      .orderBy('id')
      .execute()) as PostView[];
  }

  function readableBy(viewer: TestUser) {
    return (post: PostView) => viewer.role !== 'member' || post.status === 'published' || post.authorId === viewer.id;
  }

  /** Walks `page.next` from `url` (which must carry limit), checking every page's body and Link header. */
  async function walk(url: string, token: string, limit: number, expected: PostView[]): Promise<void> {
    const seen: string[] = [];
    let next: string | null = null;
    let pageIndex = 0;
    do {
      const pageUrl: string = next === null ? url : `${url}${url.includes('?') ? '&' : '?'}after=${next}`;
      const res = await t.request({ url: pageUrl, token });
      const slice = expected.slice(pageIndex * limit, (pageIndex + 1) * limit);
      const more = (pageIndex + 1) * limit < expected.length;
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as { data: PostView[]; page: { limit: number; next: string | null } };
      expect(body, `page ${pageIndex}`).toEqual({ data: slice, page: { limit, next: more ? expect.any(String) : null } });
      expect(res.headers['cache-control']).toBe('private, no-cache');
      if (more) {
        const path = pageUrl.split('?', 1)[0];
        const params = new URLSearchParams(pageUrl.split('?')[1] ?? '');
        params.set('after', body.page.next!);
        expect(res.headers.link).toBe(`<${path}?${params.toString()}>; rel="next"`);
      } else {
        expect(res.headers.link).toBeUndefined();
      }
      seen.push(...body.data.map((p) => p.id));
      next = body.page.next;
      pageIndex++;
    } while (next !== null && pageIndex < 50);
    expect(seen).toEqual(expected.map((p) => p.id));
    expect(new Set(seen).size).toBe(seen.length);
  }

  it('has a fixture where a member cannot read most posts', async () => {
    const posts = await allPosts();
    const hidden = posts.filter((p) => !readableBy(alice)(p));
    expect(posts).toHaveLength(60);
    expect(hidden.length).toBeGreaterThanOrEqual(30);
    expect(posts.length - hidden.length).toBeGreaterThan(20);
  });

  it('gives a member full pages of readable posts only, and the cursors walk each exactly once', async () => {
    const posts = await allPosts();
    const expected = posts.filter(readableBy(alice));
    await walk('/v1/posts?limit=10', await alice.token(), 10, expected);
    const hiddenIds = new Set(posts.filter((p) => !readableBy(alice)(p)).map((p) => p.id));
    expect(expected.some((p) => hiddenIds.has(p.id))).toBe(false);
  });

  it('filters offset pages in the database too (page=2 is the second ten readable posts)', async () => {
    const expected = (await allPosts()).filter(readableBy(alice));
    const res = await t.request({ url: '/v1/posts?limit=10&page=2', token: await alice.token() });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ data: expected.slice(10, 20), page: { limit: 10, next: expected.length > 20 ? expect.any(String) : null } });
  });

  it('shows every post, drafts included, to an editor and to the admin client', async () => {
    const posts = await allPosts();
    await walk('/v1/posts?limit=7', await editor.token(), 7, posts);
    await walk('/v1/posts?limit=100', await t.adminClientToken(), 100, posts);
  });

  it('combines status=draft with the policy: a member sees only their own drafts', async () => {
    const expected = (await allPosts()).filter((p) => p.status === 'draft' && p.authorId === alice.id);
    expect(expected.length).toBeGreaterThan(0);
    await walk('/v1/posts?status=draft&limit=4', await alice.token(), 4, expected);
  });

  it('combines status=published with the policy: every published post', async () => {
    const expected = (await allPosts()).filter((p) => p.status === 'published');
    await walk('/v1/posts?status=published&limit=5', await bob.token(), 5, expected);
  });

  it('combines authorId with the policy: another member’s published posts only', async () => {
    const expected = (await allPosts()).filter((p) => p.authorId === bob.id && p.status === 'published');
    expect(expected.length).toBeGreaterThan(0);
    await walk(`/v1/posts?authorId=${bob.id}&limit=2`, await alice.token(), 2, expected);
  });

  it('answers authorId + status=draft for another member with an empty page, not an error', async () => {
    expectPrivateJson(await t.request({ url: `/v1/posts?authorId=${bob.id}&status=draft`, token: await alice.token() }), {
      data: [],
      page: { limit: 20, next: null },
    });
  });

  it('gives an editor another member’s drafts when filtering by author and status', async () => {
    const expected = (await allPosts()).filter((p) => p.authorId === bob.id && p.status === 'draft');
    await walk(`/v1/posts?authorId=${bob.id}&status=draft&limit=3`, await editor.token(), 3, expected);
  });

  it('answers GET /v1/users/{id}/posts under a user the caller may not read, or that does not exist, with the user’s 404', async () => {
    const token = await alice.token();
    // Carol's published posts are listed by GET /v1/posts?authorId=; her profile, and so the collection under it, is not Alice's to read.
    const published = (await allPosts()).filter((p) => p.authorId === carol.id && p.status === 'published');
    expect(published.length).toBeGreaterThan(0);
    await walk(`/v1/posts?authorId=${carol.id}&limit=2`, token, 2, published);
    for (const url of [`/v1/users/${carol.id}`, `/v1/users/${carol.id}/posts`, `/v1/users/${carol.id}/posts?status=published`]) {
      expectError(await t.request({ url, token }), 404, NOT_FOUND);
    }
    const missing = 'u-does-not-exist';
    for (const caller of [token, await editor.token()]) {
      expectError(await t.request({ url: `/v1/users/${missing}`, token: caller }), 404, NOT_FOUND);
      expectError(await t.request({ url: `/v1/users/${missing}/posts`, token: caller }), 404, NOT_FOUND);
    }
  });

  it('gives GET /v1/users/{id}/posts all of a member’s own posts and all of anyone’s to an editor', async () => {
    const posts = await allPosts();
    await walk(`/v1/users/${alice.id}/posts?limit=5`, await alice.token(), 5, posts.filter((p) => p.authorId === alice.id));
    await walk(`/v1/users/${carol.id}/posts?limit=5`, await editor.token(), 5, posts.filter((p) => p.authorId === carol.id));
  });

  it('embeds authors in a list page without changing its size or membership', async () => {
    const expected = (await allPosts()).filter(readableBy(alice)).slice(0, 10);
    const aliceUser = await readUser(t, alice.id);
    const res = await t.request({ url: '/v1/posts?limit=10&expand=author', token: await alice.token() });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      data: expected.map((p) => (p.authorId === alice.id ? { ...p, author: aliceUser } : p)),
      page: { limit: 10, next: expect.any(String) },
    });
  });

  it('lists only the caller among users for a member, everyone for an editor', async () => {
    const member = await t.request({ url: '/v1/users', token: await alice.token() });
    expectPrivateJson(member, { data: [await readUser(t, alice.id)], page: { limit: 20, next: null } });
    expectPrivateJson(await t.request({ url: '/v1/users?role=editor', token: await alice.token() }), { data: [], page: { limit: 20, next: null } });
    const everyone = await t.request({ url: '/v1/users?limit=100', token: await editor.token() });
    expect(everyone.statusCode, everyone.body).toBe(200);
    const ids = (everyone.json() as { data: { id: string }[] }).data.map((u) => u.id);
    expect(ids).toEqual(expect.arrayContaining([alice.id, bob.id, carol.id, editor.id]));
    expect(ids).toHaveLength(5); // plus the bootstrapped admin
  });

  it('refuses an anonymous list', async () => {
    expectError(await t.request({ url: '/v1/posts' }), 401, UNAUTHENTICATED, REALM);
    expectError(await t.request({ url: `/v1/users/${alice.id}/posts` }), 401, UNAUTHENTICATED, REALM);
  });

  it('keeps cursors stable while posts are inserted: nothing skipped or repeated, hidden drafts still absent', async () => {
    const token = await alice.token();
    const first = await t.request({ url: '/v1/posts?limit=10', token });
    const firstBody = first.json() as { data: PostView[]; page: { next: string } };
    await createPost(t, await bob.token(), { title: 'late draft', status: 'draft' });
    const late = await createPost(t, await bob.token(), { title: 'late published', status: 'published' });
    const expected = (await allPosts()).filter(readableBy(alice));
    const seen = firstBody.data.map((p) => p.id);
    let next: string | null = firstBody.page.next;
    while (next !== null) {
      const res = await t.request({ url: `/v1/posts?limit=10&after=${next}`, token });
      const body = res.json() as { data: PostView[]; page: { next: string | null } };
      seen.push(...body.data.map((p) => p.id));
      next = body.page.next;
    }
    expect(seen).toEqual(expected.map((p) => p.id));
    expect(seen.at(-1)).toBe(late.id);
  });
});
