import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../../generated/routes.js';
import { ERROR_CODES } from '../../src/errors/registry.js';
import { serializerFor } from '../../src/rest/serialization.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const VENDOR_V1 = 'application/vnd.portcullis+json; version=1';
const CONTRACT_MISMATCH = 'The request does not match the contract.';
const ID = /^[0-9a-f]{32}$/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const ETAG = /^"[A-Za-z0-9_-]{27}"$/;

type Res = Awaited<ReturnType<TestApp['request']>>;

function error(code: keyof typeof ERROR_CODES, message: string, details?: { path: string; message: string }[]) {
  return details ? { error: { code, message, details } } : { error: { code, message } };
}

function expectError(res: Res, code: keyof typeof ERROR_CODES, message: string, details?: { path: string; message: string }[]) {
  expect({ status: res.statusCode, type: res.headers['content-type'], body: res.json() }).toEqual({
    status: ERROR_CODES[code].status,
    type: JSON_TYPE,
    body: error(code, message, details),
  });
}

function varyOf(res: Res): string[] {
  return String(res.headers.vary ?? '').split(/\s*,\s*/).filter(Boolean);
}

/** The headers every successful authenticated GET carries. */
function expectAuthenticatedGetHeaders(res: Res) {
  expect(res.headers.etag).toMatch(ETAG);
  expect(res.headers['cache-control']).toBe('private, no-cache');
  expect(varyOf(res)).toEqual(expect.arrayContaining(['Authorization', 'Accept']));
}

function allowOf(res: Res): string[] {
  return String(res.headers.allow).split(/\s*,\s*/).sort();
}

/** Contract shape of a stored post row. */
function postView(row: Record<string, unknown>) {
  return {
    id: row.id,
    authorId: row.authorId,
    title: row.title,
    body: row.body,
    status: row.status,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

function userView(row: Record<string, unknown>) {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    role: row.role,
    active: Boolean(row.active),
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

describe.each(DATABASE_KINDS)('REST conventions on %s', (kind) => {
  let t: TestApp;
  let admin: TestUser;
  let adminToken: string;

  beforeAll(async () => {
    t = await startTestApp(kind);
    admin = await t.createUser('admin');
    adminToken = await admin.token();
  });
  afterAll(async () => {
    await t?.close();
  });

  async function createPost(token: string, body: { title: string; body: string; status: 'draft' | 'published' }) {
    const res = await t.request({ method: 'POST', url: '/v1/posts', token, body });
    expect(res.statusCode).toBe(201);
    return res.json() as Record<string, unknown> & { id: string };
  }

  async function storedPost(id: string) {
    const row = await t.app.db.kysely.selectFrom('posts').selectAll().where('id', '=', id).executeTakeFirst();
    return row ? postView(row) : undefined;
  }

  async function postsFromDb(where: { status?: string; authorId?: string } = {}) {
    let query = t.app.db.kysely.selectFrom('posts').selectAll().orderBy('id');
    if (where.status) query = query.where('status', '=', where.status);
    if (where.authorId) query = query.where('authorId', '=', where.authorId);
    return (await query.execute()).map(postView);
  }

  async function usersFromDb(where: { role?: string; active?: boolean } = {}) {
    let query = t.app.db.kysely.selectFrom('users').selectAll().orderBy('id');
    if (where.role) query = query.where('role', '=', where.role);
    if (where.active !== undefined) query = query.where('active', '=', kind === 'sqlite' ? Number(where.active) : where.active);
    return (await query.execute()).map(userView);
  }

  it('POST creates (201 + Location of a GET returning the same body), PUT replaces fully, DELETE is 204 then GET is 404', async () => {
    const author = await t.createUser('member');
    const token = await author.token();

    const created = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'First', body: 'Text', status: 'draft' } });
    expect(created.statusCode).toBe(201);
    expect(created.headers['content-type']).toBe(JSON_TYPE);
    const post = created.json();
    expect(post).toEqual({
      id: expect.stringMatching(ID),
      authorId: author.id,
      title: 'First',
      body: 'Text',
      status: 'draft',
      createdAt: expect.stringMatching(ISO),
      updatedAt: post.createdAt,
    });
    expect(created.headers.location).toBe(`/v1/posts/${post.id}`);

    const read = await t.request({ url: String(created.headers.location), token });
    expect(read.statusCode).toBe(200);
    expect(read.headers['content-type']).toBe(JSON_TYPE);
    expect(read.json()).toEqual(post);
    expectAuthenticatedGetHeaders(read);

    // PUT is a full replacement: every field of the contract's PostReplace is required.
    const partial = await t.request({ method: 'PUT', url: `/v1/posts/${post.id}`, token, body: { title: 'Only the title' } });
    expectError(partial, 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/body/body', message: 'is required' },
      { path: '/body/status', message: 'is required' },
    ]);
    expect(await storedPost(post.id)).toEqual(post);

    const replaced = await t.request({
      method: 'PUT',
      url: `/v1/posts/${post.id}`,
      token,
      body: { title: 'Second', body: 'Other text', status: 'published' },
    });
    expect(replaced.statusCode).toBe(200);
    expect(replaced.headers['content-type']).toBe(JSON_TYPE);
    const after = replaced.json();
    expect(after).toEqual({ ...post, title: 'Second', body: 'Other text', status: 'published', updatedAt: expect.stringMatching(ISO) });
    expect(after.updatedAt >= post.updatedAt).toBe(true);
    expect((await t.request({ url: `/v1/posts/${post.id}`, token })).json()).toEqual(after);
    expect(await storedPost(post.id)).toEqual(after);

    const deleted = await t.request({ method: 'DELETE', url: `/v1/posts/${post.id}`, token });
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    expect(deleted.headers['content-type']).toBeUndefined();
    expect(await storedPost(post.id)).toBeUndefined();

    expectError(await t.request({ url: `/v1/posts/${post.id}`, token }), 'NOT_FOUND', 'The resource does not exist.');
    expectError(await t.request({ method: 'DELETE', url: `/v1/posts/${post.id}`, token }), 'NOT_FOUND', 'The resource does not exist.');
  });

  it('PUT on a user is a full replacement too: a missing field is 400 and the account is unchanged', async () => {
    const member = await t.createUser('member');
    const before = (await t.request({ url: `/v1/users/${member.id}`, token: adminToken })).json();
    const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: adminToken, body: { email: member.email, name: 'New name' } });
    expectError(res, 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/body/role', message: 'is required' },
      { path: '/body/active', message: 'is required' },
    ]);
    expect((await t.request({ url: `/v1/users/${member.id}`, token: adminToken })).json()).toEqual(before);

    const full = await t.request({
      method: 'PUT',
      url: `/v1/users/${member.id}`,
      token: adminToken,
      body: { email: member.email, name: 'New name', role: 'editor', active: true },
    });
    expect(full.statusCode).toBe(200);
    expect(full.json()).toEqual({ ...before, name: 'New name', role: 'editor', updatedAt: expect.stringMatching(ISO) });
  });

  it('filters users by role and by active (the strings true / false)', async () => {
    const editor = await t.createUser('editor');
    const inactive = await t.createUser('member', { active: false });
    const active = await t.createUser('member');

    const editors = await t.request({ url: '/v1/users?role=editor&limit=100', token: adminToken });
    expect(editors.statusCode).toBe(200);
    expect(editors.json()).toEqual({ data: await usersFromDb({ role: 'editor' }), page: { limit: 100, next: null } });
    expect(editors.json().data.map((u: { id: string }) => u.id)).toContain(editor.id);

    const off = await t.request({ url: '/v1/users?active=false&limit=100', token: adminToken });
    expect(off.statusCode).toBe(200);
    expect(off.json()).toEqual({ data: await usersFromDb({ active: false }), page: { limit: 100, next: null } });
    expect(off.json().data.map((u: { id: string }) => u.id)).toEqual(expect.arrayContaining([inactive.id]));
    expect(off.json().data.every((u: { active: boolean }) => u.active === false)).toBe(true);

    const on = await t.request({ url: '/v1/users?active=true&limit=100', token: adminToken });
    expect(on.json()).toEqual({ data: await usersFromDb({ active: true }), page: { limit: 100, next: null } });
    expect(on.json().data.map((u: { id: string }) => u.id)).toEqual(expect.arrayContaining([active.id, editor.id, admin.id]));
    expect(on.json().data.map((u: { id: string }) => u.id)).not.toContain(inactive.id);

    const both = await t.request({ url: '/v1/users?role=member&active=false&limit=100', token: adminToken });
    expect(both.json()).toEqual({ data: await usersFromDb({ role: 'member', active: false }), page: { limit: 100, next: null } });

    expectError(await t.request({ url: '/v1/users?active=yes', token: adminToken }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/query/active', message: 'must be boolean' },
    ]);
    expectError(await t.request({ url: '/v1/users?role=owner', token: adminToken }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/query/role', message: 'must be one of admin, editor, member' },
    ]);
  });

  it('filters posts by status and by authorId', async () => {
    const alice = await t.createUser('member');
    const bob = await t.createUser('member');
    const aliceToken = await alice.token();
    const bobToken = await bob.token();
    await createPost(aliceToken, { title: 'A1', body: '', status: 'published' });
    await createPost(aliceToken, { title: 'A2', body: '', status: 'draft' });
    await createPost(bobToken, { title: 'B1', body: '', status: 'published' });
    await createPost(bobToken, { title: 'B2', body: '', status: 'draft' });

    const byAlice = await t.request({ url: `/v1/posts?authorId=${alice.id}`, token: adminToken });
    expect(byAlice.statusCode).toBe(200);
    expect(byAlice.json()).toEqual({ data: await postsFromDb({ authorId: alice.id }), page: { limit: 20, next: null } });
    expect(byAlice.json().data.map((p: { title: string }) => p.title)).toEqual(['A1', 'A2']);

    const bobPublished = await t.request({ url: `/v1/posts?authorId=${bob.id}&status=published`, token: adminToken });
    expect(bobPublished.json()).toEqual({ data: await postsFromDb({ authorId: bob.id, status: 'published' }), page: { limit: 20, next: null } });
    expect(bobPublished.json().data.map((p: { title: string }) => p.title)).toEqual(['B1']);

    const drafts = await t.request({ url: '/v1/posts?status=draft&limit=100', token: adminToken });
    expect(drafts.json()).toEqual({ data: await postsFromDb({ status: 'draft' }), page: { limit: 100, next: null } });

    // A member sees the drafts of nobody else, whatever the filter asks for.
    const bobSeesAliceDrafts = await t.request({ url: `/v1/posts?authorId=${alice.id}&status=draft`, token: bobToken });
    expect(bobSeesAliceDrafts.json()).toEqual({ data: [], page: { limit: 20, next: null } });

    expectError(await t.request({ url: '/v1/posts?status=archived', token: adminToken }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/query/status', message: 'must be one of draft, published' },
    ]);
  });

  it('rejects unknown query parameters with 400 VALIDATION_FAILED and details', async () => {
    const post = await createPost(adminToken, { title: 'Q', body: '', status: 'published' });
    expectError(await t.request({ url: '/v1/posts?sort=x', token: adminToken }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/query/sort', message: 'is not a known property' },
    ]);
    expectError(await t.request({ url: '/v1/users?foo=1', token: adminToken }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/query/foo', message: 'is not a known property' },
    ]);
    expectError(await t.request({ url: `/v1/posts/${post.id}?foo=1`, token: adminToken }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/query/foo', message: 'is not a known property' },
    ]);
    // Operations that declare no query parameter at all reject them as well.
    expectError(await t.request({ url: '/v1/rest?foo=1' }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/query/foo', message: 'is not a known property' },
    ]);
    const before = await postsFromDb();
    expectError(
      await t.request({ method: 'POST', url: '/v1/posts?authorId=someone', token: adminToken, body: { title: 'x', body: 'y', status: 'draft' } }),
      'VALIDATION_FAILED',
      CONTRACT_MISMATCH,
      [{ path: '/query/authorId', message: 'is not a known property' }],
    );
    expectError(
      await t.request({ method: 'PUT', url: `/v1/posts/${post.id}?status=draft`, token: adminToken, body: { title: 'x', body: 'y', status: 'published' } }),
      'VALIDATION_FAILED',
      CONTRACT_MISMATCH,
      [{ path: '/query/status', message: 'is not a known property' }],
    );
    expectError(await t.request({ method: 'DELETE', url: `/v1/posts/${post.id}?force=true`, token: adminToken }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
      { path: '/query/force', message: 'is not a known property' },
    ]);
    expect(await postsFromDb()).toEqual(before);
  });

  it('expands the author with expand=author and with expand[]=author; an unknown expansion is 400', async () => {
    const editor = await t.createUser('editor');
    const editorToken = await editor.token();
    const post = await createPost(editorToken, { title: 'Expanded', body: 'b', status: 'published' });
    const author = (await t.request({ url: `/v1/users/${editor.id}`, token: adminToken })).json();
    expect(author.id).toBe(editor.id);

    for (const query of ['expand=author', 'expand[]=author', 'expand%5B%5D=author']) {
      const one = await t.request({ url: `/v1/posts/${post.id}?${query}`, token: editorToken });
      expect(one.statusCode).toBe(200);
      expect(one.json()).toEqual({ ...post, author });

      const list = await t.request({ url: `/v1/posts?authorId=${editor.id}&${query}`, token: editorToken });
      expect(list.statusCode).toBe(200);
      expect(list.json()).toEqual({ data: [{ ...post, author }], page: { limit: 20, next: null } });
    }

    // The embedded author passes its own read check: a member may not read another user.
    const member = await t.createUser('member');
    const memberToken = await member.token();
    expect((await t.request({ url: `/v1/posts/${post.id}?expand=author`, token: memberToken })).json()).toEqual(post);
    const own = await createPost(memberToken, { title: 'Mine', body: '', status: 'draft' });
    const me = (await t.request({ url: `/v1/users/${member.id}`, token: memberToken })).json();
    expect((await t.request({ url: `/v1/posts/${own.id}?expand=author`, token: memberToken })).json()).toEqual({ ...own, author: me });

    for (const query of ['expand=comments', 'expand[]=comments']) {
      expectError(await t.request({ url: `/v1/posts?${query}`, token: adminToken }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
        { path: '/query/expand/0', message: 'must be one of author' },
      ]);
      expectError(await t.request({ url: `/v1/posts/${post.id}?${query}`, token: adminToken }), 'VALIDATION_FAILED', CONTRACT_MISMATCH, [
        { path: '/query/expand/0', message: 'must be one of author' },
      ]);
    }
  });

  it('sends an ETag on every GET and answers a matching If-None-Match with 304, no body and the same ETag', async () => {
    const post = await createPost(adminToken, { title: 'Cached', body: 'b', status: 'published' });
    for (const url of [`/v1/posts/${post.id}`, '/v1/posts', `/v1/users/${admin.id}`, '/v1/users', '/v1/rest', `/v1/users/${admin.id}/posts`]) {
      const first = await t.request({ url, token: adminToken });
      expect(first.statusCode, url).toBe(200);
      expectAuthenticatedGetHeaders(first);
      const etag = String(first.headers.etag);

      const again = await t.request({ url, token: adminToken });
      expect(again.headers.etag, url).toBe(etag);

      const notModified = await t.request({ url, token: adminToken, headers: { 'if-none-match': etag } });
      expect(notModified.statusCode, url).toBe(304);
      expect(notModified.body).toBe('');
      expect(notModified.headers.etag).toBe(etag);
      expect(notModified.headers['content-type']).toBeUndefined();
      expect(notModified.headers['cache-control']).toBe('private, no-cache');
      expect(varyOf(notModified)).toEqual(expect.arrayContaining(['Authorization', 'Accept']));

      // A list of tags, one of them current; and the weak form of the current tag (weak comparison).
      expect((await t.request({ url, token: adminToken, headers: { 'if-none-match': `"other", ${etag}` } })).statusCode).toBe(304);
      expect((await t.request({ url, token: adminToken, headers: { 'if-none-match': `W/${etag}` } })).statusCode).toBe(304);
      const stale = await t.request({ url, token: adminToken, headers: { 'if-none-match': '"stale"' } });
      expect(stale.statusCode).toBe(200);
      expect(stale.body).toBe(first.body);
    }
  });

  it('serves the published contract (/v1/rest) to anonymous callers with an ETag, publicly cacheable', async () => {
    const res = await t.request({ url: '/v1/rest' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ openapi: '3.1.0' });
    expect(res.headers.etag).toMatch(ETAG);
    expect(res.headers['cache-control']).toBe('public, no-cache');
    expect(varyOf(res)).toEqual(expect.arrayContaining(['Authorization', 'Accept']));
    const notModified = await t.request({ url: '/v1/rest', headers: { 'if-none-match': String(res.headers.etag) } });
    expect(notModified.statusCode).toBe(304);
    expect(notModified.body).toBe('');
    expect(notModified.headers.etag).toBe(res.headers.etag);
  });

  it('changes the ETag when the resource changes; the old ETag no longer yields 304', async () => {
    const post = await createPost(adminToken, { title: 'v1', body: 'b', status: 'published' });
    const first = await t.request({ url: `/v1/posts/${post.id}`, token: adminToken });
    const listBefore = await t.request({ url: `/v1/posts?authorId=${admin.id}`, token: adminToken });
    const put = await t.request({ method: 'PUT', url: `/v1/posts/${post.id}`, token: adminToken, body: { title: 'v2', body: 'b', status: 'published' } });
    expect(put.statusCode).toBe(200);

    const second = await t.request({ url: `/v1/posts/${post.id}`, token: adminToken, headers: { 'if-none-match': String(first.headers.etag) } });
    expect(second.statusCode).toBe(200);
    expect(second.json()).toEqual(put.json());
    expect(second.headers.etag).toMatch(ETAG);
    expect(second.headers.etag).not.toBe(first.headers.etag);

    const listAfter = await t.request({ url: `/v1/posts?authorId=${admin.id}`, token: adminToken, headers: { 'if-none-match': String(listBefore.headers.etag) } });
    expect(listAfter.statusCode).toBe(200);
    expect(listAfter.headers.etag).not.toBe(listBefore.headers.etag);
  });

  it('If-Match on PUT and DELETE: a mismatch is 412 PRECONDITION_FAILED and changes nothing; the current ETag succeeds', async () => {
    const post = await createPost(adminToken, { title: 'Guarded', body: 'b', status: 'published' });
    const url = `/v1/posts/${post.id}`;
    const etag = String((await t.request({ url, token: adminToken })).headers.etag);
    const replacement = { title: 'Changed', body: 'c', status: 'draft' };

    for (const ifMatch of ['"not-the-etag"', `W/${etag}`, `"a", "b"`]) {
      expectError(
        await t.request({ method: 'PUT', url, token: adminToken, headers: { 'if-match': ifMatch }, body: replacement }),
        'PRECONDITION_FAILED',
        'The resource has changed since it was read.',
      );
      expectError(
        await t.request({ method: 'DELETE', url, token: adminToken, headers: { 'if-match': ifMatch } }),
        'PRECONDITION_FAILED',
        'The resource has changed since it was read.',
      );
      expect(await storedPost(post.id)).toEqual(post);
    }

    const put = await t.request({ method: 'PUT', url, token: adminToken, headers: { 'if-match': `"x", ${etag}` }, body: replacement });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toEqual({ ...post, ...replacement, updatedAt: expect.stringMatching(ISO) });
    expect(await storedPost(post.id)).toEqual(put.json());

    // The ETag read before the PUT is now stale.
    expectError(
      await t.request({ method: 'DELETE', url, token: adminToken, headers: { 'if-match': etag } }),
      'PRECONDITION_FAILED',
      'The resource has changed since it was read.',
    );
    expect(await storedPost(post.id)).toEqual(put.json());

    const current = String((await t.request({ url, token: adminToken })).headers.etag);
    expect(current).not.toBe(etag);
    const deleted = await t.request({ method: 'DELETE', url, token: adminToken, headers: { 'if-match': current } });
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    expect(await storedPost(post.id)).toBeUndefined();
  });

  it('answers POST and PUT with the ETag a GET would give, so conditional updates chain without a GET', async () => {
    const post = await createPost(adminToken, { title: 'first', body: 'b', status: 'draft' });
    const cases: { create: { url: string; body: unknown }; replace: (created: Record<string, unknown>, round: number) => unknown }[] = [
      { create: { url: '/v1/posts', body: { title: 'tagged', body: 'b', status: 'draft' } }, replace: (_c, round) => ({ title: `tagged ${round}`, body: 'b', status: 'draft' }) },
      { create: { url: `/v1/posts/${post.id}/comments`, body: { body: 'tagged' } }, replace: (_c, round) => ({ body: `tagged ${round}` }) },
      {
        create: { url: '/v1/users', body: { email: 'tagged@example.com', name: 'Tagged', role: 'member', password: 'a long enough password' } },
        replace: (c, round) => ({ email: c.email, name: `Tagged ${round}`, role: 'member', active: true }),
      },
      {
        create: { url: '/v1/clients', body: { name: 'Tagged', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member' } },
        replace: (c, round) => ({
          name: `Tagged ${round}`, type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member',
          accessTokenFormat: c.accessTokenFormat, accessTokenTtl: c.accessTokenTtl, firstParty: false, legacy: false,
        }),
      },
    ];
    for (const { create, replace } of cases) {
      const created = await t.request({ method: 'POST', url: create.url, token: adminToken, headers: { 'idempotency-key': `tag-${create.url}` }, body: create.body });
      expect(created.statusCode, created.body).toBe(201);
      expect(created.headers.etag).toMatch(ETAG);
      const location = String(created.headers.location);
      expect((await t.request({ url: location, token: adminToken })).headers.etag, location).toBe(created.headers.etag);
      // A replay of the creation carries the same ETag (a client secret shown once is not part of it).
      const replayed = await t.request({ method: 'POST', url: create.url, token: adminToken, headers: { 'idempotency-key': `tag-${create.url}` }, body: create.body });
      expect({ replayed: replayed.headers['idempotent-replayed'], etag: replayed.headers.etag }).toEqual({ replayed: 'true', etag: created.headers.etag });

      let etag = String(created.headers.etag);
      for (let round = 1; round <= 2; round++) {
        const put = await t.request({ method: 'PUT', url: location, token: adminToken, headers: { 'if-match': etag }, body: replace(created.json(), round) });
        expect(put.statusCode, put.body).toBe(200);
        expect(put.headers.etag).toMatch(ETAG);
        expect(put.headers.etag).not.toBe(etag);
        const read = await t.request({ url: location, token: adminToken });
        expect({ etag: read.headers.etag, body: read.json() }, location).toEqual({ etag: put.headers.etag, body: put.json() });
        etag = String(put.headers.etag);
      }
      // The ETag of the last PUT is the current one: a DELETE guarded by it succeeds.
      expect((await t.request({ method: 'DELETE', url: location, token: adminToken, headers: { 'if-match': etag } })).statusCode).toBe(204);
    }
  });

  it('If-Match also guards PUT on users', async () => {
    const member = await t.createUser('member');
    const url = `/v1/users/${member.id}`;
    const before = await t.request({ url, token: adminToken });
    const body = { email: member.email, name: 'Renamed', role: 'member', active: true };
    expectError(
      await t.request({ method: 'PUT', url, token: adminToken, headers: { 'if-match': '"stale"' }, body }),
      'PRECONDITION_FAILED',
      'The resource has changed since it was read.',
    );
    expect((await t.request({ url, token: adminToken })).json()).toEqual(before.json());
    const ok = await t.request({ method: 'PUT', url, token: adminToken, headers: { 'if-match': String(before.headers.etag) }, body });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ ...before.json(), name: 'Renamed', updatedAt: expect.stringMatching(ISO) });
  });

  it('answers a method the path does not support with 405 METHOD_NOT_ALLOWED and Allow', async () => {
    const post = await createPost(adminToken, { title: 'M', body: '', status: 'published' });
    const cases = [
      { method: 'PATCH', url: '/v1/posts', allow: ['GET', 'HEAD', 'POST'] },
      { method: 'DELETE', url: '/v1/posts', allow: ['GET', 'HEAD', 'POST'] },
      { method: 'PUT', url: '/v1/posts', allow: ['GET', 'HEAD', 'POST'] },
      { method: 'POST', url: `/v1/posts/${post.id}`, allow: ['DELETE', 'GET', 'HEAD', 'PATCH', 'PUT'] },
      { method: 'PATCH', url: `/v1/users/${admin.id}/posts`, allow: ['GET', 'HEAD'] },
      { method: 'DELETE', url: `/v1/users/${admin.id}/posts`, allow: ['GET', 'HEAD'] },
      { method: 'POST', url: '/v1/rest', allow: ['GET', 'HEAD'] },
    ];
    const before = await postsFromDb();
    for (const c of cases) {
      const res = await t.request({ method: c.method, url: c.url, token: adminToken, ...(c.method === 'GET' ? {} : { body: { title: 'x', body: 'y', status: 'draft' } }) });
      expect(res.statusCode, `${c.method} ${c.url}`).toBe(405);
      expect(allowOf(res)).toEqual(c.allow);
      expect(res.json()).toEqual(
        error('METHOD_NOT_ALLOWED', `${c.method} is not allowed here; use ${String(res.headers.allow)}.`),
      );
    }
    expect(await postsFromDb()).toEqual(before);
  });

  it('answers an unknown path with 404 NOT_FOUND in the error shape', async () => {
    for (const url of ['/v1/nothing', '/v1/posts/abc/nothing', '/v2/posts', '/nothing']) {
      const res = await t.request({ url, token: adminToken });
      expect(res.statusCode, url).toBe(404);
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.json()).toEqual(error('NOT_FOUND', 'There is no such endpoint.'));
    }
  });

  it('accepts only JSON request bodies: text/plain and forms are 415 UNSUPPORTED_MEDIA_TYPE', async () => {
    const before = await postsFromDb();
    const cases = [
      { 'content-type': 'text/plain', payload: '{"title":"x","body":"y","status":"draft"}' },
      { 'content-type': 'application/x-www-form-urlencoded', payload: 'title=x&body=y&status=draft' },
      { 'content-type': 'multipart/form-data; boundary=x', payload: '--x\r\nContent-Disposition: form-data; name="title"\r\n\r\nx\r\n--x--' },
      { 'content-type': 'application/xml', payload: '<post/>' },
    ];
    for (const c of cases) {
      const res = await t.request({ method: 'POST', url: '/v1/posts', token: adminToken, headers: { 'content-type': c['content-type'] }, payload: c.payload });
      expectError(res, 'UNSUPPORTED_MEDIA_TYPE', 'The request body must be application/json.');
    }
    const post = await createPost(adminToken, { title: 'T', body: '', status: 'draft' });
    expectError(
      await t.request({ method: 'PUT', url: `/v1/posts/${post.id}`, token: adminToken, headers: { 'content-type': 'text/plain' }, payload: 'x' }),
      'UNSUPPORTED_MEDIA_TYPE',
      'The request body must be application/json.',
    );
    expect(await postsFromDb()).toEqual([...before, post]);
  });

  it('refuses a body over BODY_LIMIT with 413 PAYLOAD_TOO_LARGE', async () => {
    const small = await startTestApp(kind, { BODY_LIMIT: '2048' });
    try {
      const user = await small.createUser('member');
      const token = await user.token();
      const res = await small.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'big', body: 'x'.repeat(5 * 1024), status: 'draft' } });
      expectError(res, 'PAYLOAD_TOO_LARGE', 'The request body is too large.');
      const count = await small.app.db.kysely.selectFrom('posts').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      expect(Number(count.n)).toBe(0);
      // Just under the limit is fine.
      const ok = await small.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'fits', body: 'x'.repeat(1900), status: 'draft' } });
      expect(ok.statusCode).toBe(201);
    } finally {
      await small.close();
    }
  });

  it('serves the unprefixed path with the vendor media type like /v1, echoing the media type', async () => {
    const post = await createPost(adminToken, { title: 'Versioned', body: 'b', status: 'published' });
    for (const [plain, unprefixed] of [
      ['/v1/posts', '/posts'],
      [`/v1/posts/${post.id}`, `/posts/${post.id}`],
      [`/v1/posts/${post.id}?expand=author`, `/posts/${post.id}?expand=author`],
      ['/v1/users?role=admin', '/users?role=admin'],
    ] as const) {
      const a = await t.request({ url: plain, token: adminToken });
      const b = await t.request({ url: unprefixed, token: adminToken, headers: { accept: VENDOR_V1 } });
      expect(a.statusCode).toBe(200);
      expect(b.statusCode).toBe(200);
      expect(a.headers['content-type']).toBe(JSON_TYPE);
      expect(b.headers['content-type']).toBe(VENDOR_V1);
      expect(b.json()).toEqual(a.json());
      expect(varyOf(b)).toEqual(expect.arrayContaining(['Accept', 'Authorization']));
      expectAuthenticatedGetHeaders(b);
    }
    // /v1 with the vendor type for version 1 is fine, and echoes it too.
    const both = await t.request({ url: `/v1/posts/${post.id}`, token: adminToken, headers: { accept: VENDOR_V1 } });
    expect(both.statusCode).toBe(200);
    expect(both.headers['content-type']).toBe(VENDOR_V1);
    expect(both.json()).toEqual(post);

    // Writes work through the unprefixed path as well.
    const created = await t.request({
      method: 'POST',
      url: '/posts',
      token: adminToken,
      headers: { accept: VENDOR_V1, 'content-type': VENDOR_V1 },
      payload: JSON.stringify({ title: 'Via vendor', body: '', status: 'draft' }),
    });
    expect(created.statusCode).toBe(201);
    expect(created.headers['content-type']).toBe(VENDOR_V1);
    expect(created.headers.location).toBe(`/v1/posts/${created.json().id}`);
    expect((await t.request({ url: String(created.headers.location), token: adminToken })).json()).toEqual(created.json());
  });

  it('answers unknown or missing versions with 406 NOT_ACCEPTABLE', async () => {
    const version2 = 'API version 2 is not available; supported: 1.';
    expectError(
      await t.request({ url: '/posts', token: adminToken, headers: { accept: 'application/vnd.portcullis+json; version=2' } }),
      'NOT_ACCEPTABLE',
      version2,
    );
    expectError(
      await t.request({ url: '/v1/posts', token: adminToken, headers: { accept: 'application/vnd.portcullis+json; version=2' } }),
      'NOT_ACCEPTABLE',
      version2,
    );
    for (const accept of [undefined, 'application/json', '*/*']) {
      expectError(
        await t.request({ url: '/posts', token: adminToken, headers: accept ? { accept } : {} }),
        'NOT_ACCEPTABLE',
        'Use a /v1 path or send Accept: application/vnd.portcullis+json; version=1.',
      );
    }
    expectError(
      await t.request({ url: '/posts', token: adminToken, headers: { accept: 'application/vnd.portcullis+json' } }),
      'NOT_ACCEPTABLE',
      'The application/vnd.portcullis+json media type needs a version parameter (version=1).',
    );
    // Nothing was written through a refused version.
    const before = await postsFromDb();
    expectError(
      await t.request({
        method: 'POST',
        url: '/posts',
        token: adminToken,
        headers: { accept: 'application/vnd.portcullis+json; version=2' },
        body: { title: 'x', body: 'y', status: 'draft' },
      }),
      'NOT_ACCEPTABLE',
      version2,
    );
    expect(await postsFromDb()).toEqual(before);
  });

  it('never answers a failed request with 200: every failure has its registry status and the error shape', async () => {
    const post = await createPost(adminToken, { title: 'F', body: '', status: 'published' });
    const member = await t.createUser('member');
    const memberToken = await member.token();
    const readOnly = await admin.token(['read:posts']);
    const failures: { label: string; req: Parameters<TestApp['request']>[0] }[] = [
      { label: 'bad limit', req: { url: '/v1/posts?limit=abc', token: adminToken } },
      { label: 'no token', req: { url: '/v1/posts' } },
      { label: 'invalid token', req: { url: '/v1/posts', token: 'not-a-real-token' } },
      { label: 'missing scope', req: { method: 'POST', url: '/v1/posts', token: readOnly, body: { title: 'x', body: '', status: 'draft' } } },
      { label: 'role', req: { url: '/v1/clients', token: memberToken } },
      { label: 'missing resource', req: { url: '/v1/posts/doesnotexist', token: adminToken } },
      { label: 'unknown path', req: { url: '/v1/unknown', token: adminToken } },
      { label: 'method', req: { method: 'POST', url: `/v1/posts/${post.id}`, token: adminToken } },
      { label: 'version', req: { url: '/v1/posts', token: adminToken, headers: { accept: 'application/vnd.portcullis+json; version=9' } } },
      { label: 'precondition', req: { method: 'DELETE', url: `/v1/posts/${post.id}`, token: adminToken, headers: { 'if-match': '"x"' } } },
      { label: 'media type', req: { method: 'POST', url: '/v1/posts', token: adminToken, headers: { 'content-type': 'text/plain' }, payload: 'x' } },
      { label: 'conflict', req: { method: 'POST', url: '/v1/users', token: adminToken, body: { email: admin.email, name: 'Dup', role: 'member', password: 'long-enough-password' } } },
      { label: 'malformed json', req: { method: 'POST', url: '/v1/posts', token: adminToken, headers: { 'content-type': 'application/json' }, payload: '{' } },
    ];
    const statuses: Record<string, number> = {};
    for (const { label, req } of failures) {
      const res = await t.request(req);
      statuses[label] = res.statusCode;
      expect(res.statusCode, label).toBeGreaterThanOrEqual(400);
      expect(res.headers['content-type'], label).toBe(JSON_TYPE);
      const body = res.json();
      expect(Object.keys(body), label).toEqual(['error']);
      const code = body.error.code as keyof typeof ERROR_CODES;
      expect(ERROR_CODES[code]?.status, label).toBe(res.statusCode);
      expect(Object.keys(body.error).sort(), label).toEqual(code === 'VALIDATION_FAILED' && body.error.details ? ['code', 'details', 'message'] : ['code', 'message']);
      expect(typeof body.error.message).toBe('string');
    }
    expect(statuses).toEqual({
      'bad limit': 400,
      'no token': 401,
      'invalid token': 401,
      'missing scope': 403,
      role: 403,
      'missing resource': 404,
      'unknown path': 404,
      method: 405,
      version: 406,
      precondition: 412,
      'media type': 415,
      conflict: 409,
      'malformed json': 400,
    });
  });

  it('never sends a password or its hash: users are serialized with the contract schema', async () => {
    const password = 'a-very-secret-password-1';
    const created = await t.request({
      method: 'POST',
      url: '/v1/users',
      token: adminToken,
      body: { email: `new-${newId()}@example.com`, name: 'New', role: 'editor', password },
    });
    expect(created.statusCode).toBe(201);
    const user = created.json();
    expect(user).toEqual({
      id: expect.stringMatching(ID),
      email: user.email,
      name: 'New',
      role: 'editor',
      active: true,
      createdAt: expect.stringMatching(ISO),
      updatedAt: user.createdAt,
    });
    const stored = await t.app.db.kysely.selectFrom('users').select('passwordHash').where('id', '=', user.id).executeTakeFirstOrThrow();
    expect(stored.passwordHash.length).toBeGreaterThan(20);

    const editorToken = await (async () => {
      const editor = await t.createUser('editor');
      return editor.token();
    })();
    const post = await createPost(adminToken, { title: 'P', body: '', status: 'published' });
    const responses = [
      created,
      await t.request({ url: `/v1/users/${user.id}`, token: adminToken }),
      await t.request({ url: '/v1/users?limit=100', token: adminToken }),
      await t.request({ url: '/v1/users?limit=100', token: editorToken }),
      await t.request({ url: `/v1/posts/${post.id}?expand=author`, token: adminToken }),
      await t.request({ url: `/v1/posts?expand=author&limit=100`, token: adminToken }),
      await t.request({
        method: 'PUT',
        url: `/v1/users/${user.id}`,
        token: adminToken,
        body: { email: user.email, name: 'New', role: 'editor', active: true, password: 'another-secret-password' },
      }),
      await t.request({ url: '/v1/authorization', token: adminToken }),
    ];
    for (const res of responses) {
      expect(res.statusCode).toBeLessThan(300);
      expect(res.body).not.toMatch(/password/i);
      expect(res.body).not.toContain(stored.passwordHash);
    }
    const userKeys = ['active', 'createdAt', 'email', 'id', 'name', 'role', 'updatedAt'];
    for (const u of responses[2]!.json().data) expect(Object.keys(u).sort()).toEqual(userKeys);
    expect(Object.keys(responses[6]!.json()).sort()).toEqual(userKeys);
  });

  it('never sends client secrets: client listings carry only the contract fields', async () => {
    const list = await t.request({ url: '/v1/clients', token: adminToken });
    expect(list.statusCode).toBe(200);
    expect(list.body).not.toMatch(/secret/i);
    const clientKeys = Object.keys((routes.find((r) => r.operationId === 'getClient')!.schema.response['200'] as { properties: object }).properties).sort();
    for (const client of list.json().data) {
      for (const key of Object.keys(client)) expect(clientKeys).toContain(key);
    }
  });

  it('serializes with the response schema: properties outside the contract never leave the server', async () => {
    // A column the contract does not know (e.g. added by a later migration) must not leak.
    const isolated = await startTestApp(kind);
    try {
      const db = isolated.app.db.kysely;
      await sql`alter table posts add column internal_note text`.execute(db);
      const author = await isolated.createUser('member');
      const token = await author.token();
      const id = newId();
      const now = nowIso();
      await sql`insert into posts (id, author_id, title, body, status, created_at, updated_at, internal_note)
                values (${id}, ${author.id}, ${'Row'}, ${'Body'}, ${'published'}, ${now}, ${now}, ${'do not send'})`.execute(db);
      const expected = { id, authorId: author.id, title: 'Row', body: 'Body', status: 'published', createdAt: now, updatedAt: now };

      const one = await isolated.request({ url: `/v1/posts/${id}`, token });
      expect(one.statusCode).toBe(200);
      expect(one.json()).toEqual(expected);
      const list = await isolated.request({ url: '/v1/posts', token });
      expect(list.json()).toEqual({ data: [expected], page: { limit: 20, next: null } });
      const put = await isolated.request({ method: 'PUT', url: `/v1/posts/${id}`, token, body: { title: 'Row', body: 'Body', status: 'published' } });
      expect(put.json()).toEqual({ ...expected, updatedAt: expect.stringMatching(ISO) });
      for (const res of [one, list, put]) {
        expect(res.body).not.toContain('do not send');
        expect(res.body).not.toMatch(/internal/i);
      }
    } finally {
      await isolated.close();
    }

    // The serializer compiled from the contract drops unknown properties at every level.
    const schema = routes.find((r) => r.operationId === 'getPost')!.schema.response['200']!;
    const out = JSON.parse(
      serializerFor(schema)({
        id: 'p1',
        authorId: 'u1',
        title: 't',
        body: 'b',
        status: 'draft',
        createdAt: '2025-01-01T00:00:00.000Z',
        updatedAt: '2025-01-01T00:00:00.000Z',
        secret: 'x',
        author: { id: 'u1', email: 'a@example.com', name: 'A', role: 'member', active: true, createdAt: '2025-01-01T00:00:00.000Z', updatedAt: '2025-01-01T00:00:00.000Z', passwordHash: 'h' },
      }),
    );
    expect(out).toEqual({
      id: 'p1',
      authorId: 'u1',
      title: 't',
      body: 'b',
      status: 'draft',
      createdAt: '2025-01-01T00:00:00.000Z',
      updatedAt: '2025-01-01T00:00:00.000Z',
      author: { id: 'u1', email: 'a@example.com', name: 'A', role: 'member', active: true, createdAt: '2025-01-01T00:00:00.000Z', updatedAt: '2025-01-01T00:00:00.000Z' },
    });
  });
});
