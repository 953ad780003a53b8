import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createComment, createPost, expectError, NOT_FOUND } from '../access/support.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

const MERGE_PATCH = 'application/merge-patch+json';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

// PATCH with a JSON merge patch (RFC 7396) wherever PUT exists, under the rules of PUT.
describe.each(DATABASE_KINDS)('PATCH (application/merge-patch+json) on %s', (kind) => {
  let t: TestApp;
  let author: TestUser;
  let authorToken: string;
  let adminToken: string;

  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000' });
    author = await t.createUser('member');
    authorToken = await author.token();
    adminToken = await t.adminClientToken();
  });
  afterAll(() => t.close());

  const patch = (url: string, token: string, body: unknown, headers: Record<string, string> = {}) =>
    t.request({ method: 'PATCH', url, token, headers: { 'content-type': MERGE_PATCH, ...headers }, payload: JSON.stringify(body) });

  it('changes only the fields the patch names, answers as PUT would, with the ETag a GET now gives', async () => {
    const post = await createPost(t, authorToken, { title: 'Before', body: 'kept', status: 'draft' });
    const res = await patch(`/v1/posts/${post.id}`, authorToken, { status: 'published' });
    expect({ status: res.statusCode, type: res.headers['content-type'], cache: res.headers['cache-control'] }).toEqual({
      status: 200,
      type: 'application/json; charset=utf-8',
      cache: 'no-store',
    });
    expect(res.json()).toEqual({ ...post, status: 'published', updatedAt: expect.stringMatching(ISO) });
    const read = await t.request({ url: `/v1/posts/${post.id}`, token: authorToken });
    expect({ body: read.json(), etag: read.headers.etag }).toEqual({ body: res.json(), etag: res.headers.etag });

    const comment = await createComment(t, authorToken, post.id, 'first words');
    const edited = await patch(`/v1/comments/${comment.id}`, authorToken, { body: 'better words' });
    expect({ status: edited.statusCode, body: edited.json() }).toEqual({ status: 200, body: { ...comment, body: 'better words' } });
  });

  it('refuses a patch that leaves the resource invalid, an unknown field, and a body that is not an object; nothing changes', async () => {
    const post = await createPost(t, authorToken, { title: 'Whole', status: 'draft' });
    const url = `/v1/posts/${post.id}`;
    // Only an optional field may be removed (`null`): the contract's patch schema says which.
    expectError(await patch(url, authorToken, { title: null }), 400, {
      error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path: '/body/title', message: 'must be string' }] },
    });
    expectError(await patch(url, authorToken, { status: 'archived' }), 400, {
      error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path: '/body/status', message: 'must be one of draft, published' }] },
    });
    expectError(await patch(url, authorToken, { authorId: 'someone-else' }), 400, {
      error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path: '/body/authorId', message: 'is not a known property' }] },
    });
    expectError(await patch(url, authorToken, ['title']), 400, {
      error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path: '/body', message: 'must be object' }] },
    });
    expect((await t.request({ url, token: authorToken })).json()).toEqual(post);
  });

  it('takes only application/merge-patch+json on PATCH, and never a merge patch on PUT (415)', async () => {
    const post = await createPost(t, authorToken, { title: 'Typed', status: 'draft' });
    const url = `/v1/posts/${post.id}`;
    expectError(await t.request({ method: 'PATCH', url, token: authorToken, body: { title: 'json' } }), 415, {
      error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'The request body must be application/merge-patch+json.' },
    });
    expectError(
      await t.request({ method: 'PUT', url, token: authorToken, headers: { 'content-type': MERGE_PATCH }, payload: JSON.stringify({ title: 't', body: 'b', status: 'draft' }) }),
      415,
      { error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'The request body must be application/json.' } },
    );
    expectError(await t.request({ method: 'POST', url: '/v1/posts', token: authorToken, headers: { 'content-type': MERGE_PATCH }, payload: '{"title":"t","body":"b","status":"draft"}' }), 415, {
      error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'The request body must be application/json.' },
    });
    expect((await t.request({ url, token: authorToken })).json()).toEqual(post);
  });

  it('applies PUT\'s rules: If-Match, the per-resource check, protected fields', async () => {
    const post = await createPost(t, authorToken, { title: 'Guarded', status: 'draft' });
    const url = `/v1/posts/${post.id}`;
    const etag = String((await t.request({ url, token: authorToken })).headers.etag);
    expectError(await patch(url, authorToken, { title: 'stale' }, { 'if-match': '"stale"' }), 412, {
      error: { code: 'PRECONDITION_FAILED', message: 'The resource has changed since it was read.' },
    });
    const first = await patch(url, authorToken, { title: 'one' }, { 'if-match': etag });
    expect(first.statusCode, first.body).toBe(200);
    // Chained: the ETag of the last change guards the next one.
    const second = await patch(url, authorToken, { title: 'two' }, { 'if-match': String(first.headers.etag) });
    expect([second.statusCode, second.json().title]).toEqual([200, 'two']);
    expectError(await patch(url, authorToken, { title: 'three' }, { 'if-match': etag }), 412, {
      error: { code: 'PRECONDITION_FAILED', message: 'The resource has changed since it was read.' },
    });

    // Someone else's draft: the same 404 as a missing post, nothing changed.
    const other = await t.createUser('member');
    expectError(await patch(url, await other.token(), { title: 'mine now' }), 404, NOT_FOUND);
    expect((await t.request({ url, token: authorToken })).json().title).toBe('two');

    // A member may patch their profile, not their role or status.
    const self = `/v1/users/${author.id}`;
    expectError(await patch(self, authorToken, { role: 'admin' }), 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change role.' } });
    expectError(await patch(self, authorToken, { active: false }), 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change active.' } });
    const renamed = await patch(self, authorToken, { name: 'Renamed' });
    expect([renamed.statusCode, renamed.json().name, renamed.json().role, renamed.json().active]).toEqual([200, 'Renamed', 'member', true]);
  });

  it('keeps a user\'s password when the patch does not name it, or names it null; an admin\'s new one ends the user\'s tokens as PUT does', async () => {
    const user = await t.createUser('member');
    const token = await user.token();
    const url = `/v1/users/${user.id}`;
    for (const body of [{ name: 'Same password' }, { password: null }]) {
      const res = await patch(url, adminToken, body);
      expect(res.statusCode, res.body).toBe(200);
      expect((await t.request({ url, token })).statusCode).toBe(200);
    }
    const reset = await patch(url, adminToken, { password: 'a brand new long password' });
    expect([reset.statusCode, 'password' in reset.json()]).toEqual([200, false]);
    const after = await t.request({ url, token });
    expect(after.statusCode).toBe(401);
  });

  it('patches a client registration under the replacement\'s rules', async () => {
    const created = await t.request({
      method: 'POST',
      url: '/v1/clients',
      token: adminToken,
      body: { name: 'Patched', type: 'confidential', redirectUris: ['https://app.example.com/cb'], grantTypes: ['authorization_code'], scopes: ['read:posts'] },
    });
    expect(created.statusCode, created.body).toBe(201);
    const url = `/v1/clients/${created.json().id}`;
    const renamed = await patch(url, adminToken, { name: 'Patched again', accessTokenTtl: 900 });
    expect(renamed.statusCode, renamed.body).toBe(200);
    const { clientSecret: _secret, ...registered } = created.json();
    expect(renamed.json()).toEqual({ ...registered, name: 'Patched again', accessTokenTtl: 900 });
    // Removing the redirect URIs of a client that uses the code flow leaves an invalid registration.
    const invalid = await patch(url, adminToken, { redirectUris: null });
    expectError(invalid, 400, {
      error: {
        code: 'VALIDATION_FAILED',
        message: 'The client registration is not valid.',
        details: [{ path: '/body/redirectUris', message: 'authorization_code needs at least one redirect URI' }],
      },
    });
    // A value the replacement would refuse is refused in a patch too.
    const ccClient = await t.request({
      method: 'POST',
      url: '/v1/clients',
      token: adminToken,
      body: { name: 'Machine', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member' },
    });
    const removedTtl = await patch(`/v1/clients/${ccClient.json().id}`, adminToken, { accessTokenTtl: 60 });
    expectError(removedTtl, 400, {
      error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path: '/body/accessTokenTtl', message: 'must be >= 300' }] },
    });
    expect((await t.request({ url, token: adminToken })).json().redirectUris).toEqual(['https://app.example.com/cb']);
  });
});
