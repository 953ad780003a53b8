import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/storage/ids.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import type { TestApp, TestUser } from '../helpers/app.js';
import {
  NOT_FOUND,
  UNAUTHENTICATED,
  REALM,
  createComment,
  createPost,
  expectError,
  expectPrivateJson,
  readUser,
  startAccessApp,
  type CommentView,
  type PostView,
} from './support.js';

describe.each(DATABASE_KINDS)('per-resource checks (seed authorization rules 4-5) on %s', (kind) => {
  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;
  let editor: TestUser;
  let admin: TestUser;
  let aliceDraft: PostView;
  let alicePublished: PostView;
  let bobPublished: PostView;
  let commentOnDraft: CommentView;
  /** One token per role from a real sign-in (authorization code + PKCE through the login page); the rest are minted. */
  let signedIn: { alice: string; editor: string; admin: string };

  beforeAll(async () => {
    t = await startAccessApp(kind);
    alice = await t.createUser('member');
    bob = await t.createUser('member');
    editor = await t.createUser('editor');
    admin = await t.createUser('admin');
    signedIn = { alice: await alice.signIn(), editor: await editor.signIn(), admin: await admin.signIn() };
    aliceDraft = await createPost(t, signedIn.alice, { title: 'alice draft', status: 'draft' });
    alicePublished = await createPost(t, signedIn.alice, { title: 'alice published', status: 'published' });
    bobPublished = await createPost(t, await bob.token(), { title: 'bob published', status: 'published' });
    commentOnDraft = await createComment(t, await alice.token(), aliceDraft.id, 'note to self');
  });
  afterAll(async () => {
    await t?.close();
  });

  type Res = Awaited<ReturnType<TestApp['request']>>;

  /** A denied resource must be indistinguishable from a missing one: status, body bytes and headers. */
  function expectSameAsMissing(denied: Res, missing: Res): void {
    expectError(denied, 404, NOT_FOUND, null);
    expect(denied.statusCode).toBe(missing.statusCode);
    expect(denied.body).toBe(missing.body);
    for (const header of ['content-type', 'content-length', 'cache-control', 'vary', 'www-authenticate', 'etag']) {
      expect(denied.headers[header], header).toEqual(missing.headers[header]);
    }
  }

  async function readPostAsAdmin(id: string): Promise<Res> {
    return t.request({ url: `/v1/posts/${id}`, token: await admin.token() });
  }

  describe('drafts', () => {
    it('answers another member’s GET of a draft with 404, byte-for-byte the same as a missing id', async () => {
      const token = await bob.token();
      const denied = await t.request({ url: `/v1/posts/${aliceDraft.id}`, token });
      const missing = await t.request({ url: `/v1/posts/${newId()}`, token });
      expectSameAsMissing(denied, missing);
    });

    it('does not turn If-None-Match into a 304 oracle on a hidden draft', async () => {
      const res = await t.request({ url: `/v1/posts/${aliceDraft.id}`, token: await bob.token(), headers: { 'if-none-match': '*' } });
      expectError(res, 404, NOT_FOUND, null);
    });

    it('answers HEAD of a hidden draft exactly like HEAD of a missing id', async () => {
      const token = await bob.token();
      const denied = await t.request({ method: 'HEAD', url: `/v1/posts/${aliceDraft.id}`, token });
      const missing = await t.request({ method: 'HEAD', url: `/v1/posts/${newId()}`, token });
      expect({ status: denied.statusCode, body: denied.body }).toEqual({ status: 404, body: '' });
      for (const header of ['content-type', 'content-length', 'cache-control', 'vary', 'www-authenticate', 'etag']) {
        expect(denied.headers[header], header).toEqual(missing.headers[header]);
      }
      const own = await t.request({ method: 'HEAD', url: `/v1/posts/${aliceDraft.id}`, token: await alice.token() });
      expect(own.statusCode).toBe(200);
    });

    it('enforces the same checks on the unversioned path with the vendor media type', async () => {
      const accept = { accept: 'application/vnd.portcullis+json; version=1' };
      const denied = await t.request({ url: `/posts/${aliceDraft.id}`, token: await bob.token(), headers: accept });
      expect({ status: denied.statusCode, body: denied.json() }).toEqual({ status: 404, body: NOT_FOUND });
      const anonymous = await t.request({ url: `/posts/${aliceDraft.id}`, headers: accept });
      expect({ status: anonymous.statusCode, body: anonymous.json(), challenge: anonymous.headers['www-authenticate'] }).toEqual({
        status: 401,
        body: UNAUTHENTICATED,
        challenge: REALM,
      });
      const own = await t.request({ url: `/posts/${aliceDraft.id}`, token: await alice.token(), headers: accept });
      expect({ status: own.statusCode, body: own.json(), type: own.headers['content-type'] }).toEqual({
        status: 200,
        body: aliceDraft,
        type: 'application/vnd.portcullis+json; version=1',
      });
    });

    it('answers an anonymous GET of a draft with 401, not 404', async () => {
      expectError(await t.request({ url: `/v1/posts/${aliceDraft.id}` }), 401, UNAUTHENTICATED, REALM);
    });

    it('shows the draft to its author, signed in or with a minted token', async () => {
      expectPrivateJson(await t.request({ url: `/v1/posts/${aliceDraft.id}`, token: signedIn.alice }), aliceDraft);
      expectPrivateJson(await t.request({ url: `/v1/posts/${aliceDraft.id}`, token: await alice.token() }), aliceDraft);
    });

    it('shows the draft to an editor, signed in or with a minted token', async () => {
      expectPrivateJson(await t.request({ url: `/v1/posts/${aliceDraft.id}`, token: signedIn.editor }), aliceDraft);
      expectPrivateJson(await t.request({ url: `/v1/posts/${aliceDraft.id}`, token: await editor.token() }), aliceDraft);
    });

    it('shows the draft to an admin user (signed in or with a minted token) and to the admin client', async () => {
      expectPrivateJson(await t.request({ url: `/v1/posts/${aliceDraft.id}`, token: signedIn.admin }), aliceDraft);
      expectPrivateJson(await t.request({ url: `/v1/posts/${aliceDraft.id}`, token: await admin.token() }), aliceDraft);
      expectPrivateJson(await t.request({ url: `/v1/posts/${aliceDraft.id}`, token: await t.adminClientToken() }), aliceDraft);
    });

    it('shows another member’s published post', async () => {
      expectPrivateJson(await t.request({ url: `/v1/posts/${alicePublished.id}`, token: await bob.token() }), alicePublished);
    });
  });

  describe('changing posts', () => {
    it('answers another member’s PUT of a draft with the missing-id 404 and changes nothing', async () => {
      const token = await bob.token();
      const body = { title: 'hijacked', body: 'x', status: 'published' };
      const denied = await t.request({ method: 'PUT', url: `/v1/posts/${aliceDraft.id}`, token, body });
      const missing = await t.request({ method: 'PUT', url: `/v1/posts/${newId()}`, token, body });
      expectSameAsMissing(denied, missing);
      expect((await readPostAsAdmin(aliceDraft.id)).json()).toEqual(aliceDraft);
    });

    it('answers another member’s PUT of a published post (readable, not writable) with 404 and changes nothing', async () => {
      const res = await t.request({ method: 'PUT', url: `/v1/posts/${alicePublished.id}`, token: await bob.token(), body: { title: 'defaced', body: 'x', status: 'published' } });
      expectError(res, 404, NOT_FOUND, null);
      expect((await readPostAsAdmin(alicePublished.id)).json()).toEqual(alicePublished);
    });

    it('does not let If-Match reveal a hidden post: 404, never 412', async () => {
      const res = await t.request({
        method: 'PUT',
        url: `/v1/posts/${aliceDraft.id}`,
        token: await bob.token(),
        headers: { 'if-match': '"not-the-etag"' },
        body: { title: 'x', body: 'x', status: 'draft' },
      });
      expectError(res, 404, NOT_FOUND, null);
    });

    it('answers another member’s DELETE with 404 and deletes nothing', async () => {
      const token = await bob.token();
      const denied = await t.request({ method: 'DELETE', url: `/v1/posts/${alicePublished.id}`, token });
      const missing = await t.request({ method: 'DELETE', url: `/v1/posts/${newId()}`, token });
      expectSameAsMissing(denied, missing);
      const deniedDraft = await t.request({ method: 'DELETE', url: `/v1/posts/${aliceDraft.id}`, token });
      expectSameAsMissing(deniedDraft, missing);
      expect((await readPostAsAdmin(alicePublished.id)).statusCode).toBe(200);
      expect((await readPostAsAdmin(aliceDraft.id)).statusCode).toBe(200);
    });

    it('lets a member PUT and DELETE their own post', async () => {
      const token = await bob.token();
      const own = await createPost(t, token, { title: 'mine', status: 'draft' });
      const put = await t.request({ method: 'PUT', url: `/v1/posts/${own.id}`, token, body: { title: 'mine, edited', body: 'new body', status: 'published' } });
      expect(put.statusCode, put.body).toBe(200);
      const updated = put.json() as PostView;
      expect(updated).toEqual({ ...own, title: 'mine, edited', body: 'new body', status: 'published', updatedAt: updated.updatedAt });
      expect(Date.parse(updated.updatedAt)).toBeGreaterThanOrEqual(Date.parse(own.updatedAt));
      expect((await t.request({ url: `/v1/posts/${own.id}`, token })).json()).toEqual(updated);
      const del = await t.request({ method: 'DELETE', url: `/v1/posts/${own.id}`, token });
      expect({ status: del.statusCode, body: del.body }).toEqual({ status: 204, body: '' });
      expectError(await t.request({ url: `/v1/posts/${own.id}`, token }), 404, NOT_FOUND, null);
    });

    it('lets an editor PUT and DELETE anyone’s post, the author unchanged', async () => {
      const victim = await createPost(t, await alice.token(), { title: 'to be edited', status: 'draft' });
      const token = await editor.token();
      const put = await t.request({ method: 'PUT', url: `/v1/posts/${victim.id}`, token, body: { title: 'edited by editor', body: 'b', status: 'published' } });
      expect(put.statusCode, put.body).toBe(200);
      expect(put.json()).toEqual({ ...victim, title: 'edited by editor', body: 'b', status: 'published', authorId: alice.id, updatedAt: put.json().updatedAt });
      const del = await t.request({ method: 'DELETE', url: `/v1/posts/${victim.id}`, token });
      expect(del.statusCode).toBe(204);
      expectError(await readPostAsAdmin(victim.id), 404, NOT_FOUND, null);
    });
  });

  describe('comments follow their post', () => {
    it('answers another member’s GET of a comment on a draft with the missing-id 404', async () => {
      const token = await bob.token();
      const denied = await t.request({ url: `/v1/comments/${commentOnDraft.id}`, token });
      const missing = await t.request({ url: `/v1/comments/${newId()}`, token });
      expectSameAsMissing(denied, missing);
    });

    it('shows a comment on a draft to the draft’s author and to an editor', async () => {
      expectPrivateJson(await t.request({ url: `/v1/comments/${commentOnDraft.id}`, token: await alice.token() }), commentOnDraft);
      expectPrivateJson(await t.request({ url: `/v1/comments/${commentOnDraft.id}`, token: await editor.token() }), commentOnDraft);
    });

    it('answers another member’s GET /v1/posts/{draftId}/comments with the missing-id 404', async () => {
      const token = await bob.token();
      const denied = await t.request({ url: `/v1/posts/${aliceDraft.id}/comments`, token });
      const missing = await t.request({ url: `/v1/posts/${newId()}/comments`, token });
      expectSameAsMissing(denied, missing);
    });

    it('lists the comments of a draft for its author', async () => {
      expectPrivateJson(await t.request({ url: `/v1/posts/${aliceDraft.id}/comments`, token: await alice.token() }), {
        data: [commentOnDraft],
        page: { limit: 20, next: null },
      });
    });

    it('answers a comment POSTed on a draft the caller cannot read with the missing-id 404, creating nothing', async () => {
      const token = await bob.token();
      const denied = await t.request({ method: 'POST', url: `/v1/posts/${aliceDraft.id}/comments`, token, body: { body: 'sneaky' } });
      const missing = await t.request({ method: 'POST', url: `/v1/posts/${newId()}/comments`, token, body: { body: 'sneaky' } });
      expectSameAsMissing(denied, missing);
      const rows = await t.database.db.kysely.selectFrom('comments').select('id').where('authorId', '=', bob.id).execute();
      expect(rows).toEqual([]);
    });

    it('hides a readable comment as soon as its post goes back to draft', async () => {
      const post = await createPost(t, await alice.token(), { title: 'soon a draft', status: 'published' });
      const comment = await createComment(t, await bob.token(), post.id, 'first!');
      expectPrivateJson(await t.request({ url: `/v1/comments/${comment.id}`, token: await bob.token() }), comment);
      const put = await t.request({ method: 'PUT', url: `/v1/posts/${post.id}`, token: await alice.token(), body: { title: post.title, body: post.body, status: 'draft' } });
      expect(put.statusCode, put.body).toBe(200);
      expectError(await t.request({ url: `/v1/comments/${comment.id}`, token: await bob.token() }), 404, NOT_FOUND, null);
      expectError(await t.request({ url: `/v1/posts/${post.id}/comments`, token: await bob.token() }), 404, NOT_FOUND, null);
    });

    it('hides a comment from its own author’s writes while its post is a draft, and gives it back on publishing', async () => {
      const post = await createPost(t, await alice.token(), { title: 'back and forth', status: 'published' });
      const token = await bob.token();
      const comment = await createComment(t, token, post.id, 'mine');
      const setStatus = async (status: 'draft' | 'published') => {
        const res = await t.request({ method: 'PUT', url: `/v1/posts/${post.id}`, token: await alice.token(), body: { title: post.title, body: post.body, status } });
        expect(res.statusCode, res.body).toBe(200);
      };
      await setStatus('draft');
      expectError(await t.request({ url: `/v1/comments/${comment.id}`, token }), 404, NOT_FOUND, null);
      expectError(await t.request({ method: 'PUT', url: `/v1/comments/${comment.id}`, token, body: { body: 'edited while hidden' } }), 404, NOT_FOUND, null);
      expectError(await t.request({ method: 'DELETE', url: `/v1/comments/${comment.id}`, token }), 404, NOT_FOUND, null);
      // Nothing changed: the post's author still sees the comment as it was.
      expectPrivateJson(await t.request({ url: `/v1/comments/${comment.id}`, token: await alice.token() }), comment);

      await setStatus('published');
      const put = await t.request({ method: 'PUT', url: `/v1/comments/${comment.id}`, token, body: { body: 'edited' } });
      expect({ status: put.statusCode, body: put.json() }).toEqual({ status: 200, body: { ...comment, body: 'edited', updatedAt: put.json().updatedAt } });
      const del = await t.request({ method: 'DELETE', url: `/v1/comments/${comment.id}`, token });
      expect({ status: del.statusCode, body: del.body }).toEqual({ status: 204, body: '' });
    });

    it('does not let a member change or delete another member’s comment (404), and lets them change their own', async () => {
      const aliceComment = await createComment(t, await alice.token(), bobPublished.id, 'by alice');
      const token = await bob.token();
      expectError(await t.request({ method: 'PUT', url: `/v1/comments/${aliceComment.id}`, token, body: { body: 'by bob now' } }), 404, NOT_FOUND, null);
      expectError(await t.request({ method: 'DELETE', url: `/v1/comments/${aliceComment.id}`, token }), 404, NOT_FOUND, null);
      expectPrivateJson(await t.request({ url: `/v1/comments/${aliceComment.id}`, token }), aliceComment);

      const bobComment = await createComment(t, token, bobPublished.id, 'by bob');
      const put = await t.request({ method: 'PUT', url: `/v1/comments/${bobComment.id}`, token, body: { body: 'by bob, edited' } });
      expect({ status: put.statusCode, body: put.json() }).toEqual({ status: 200, body: { ...bobComment, body: 'by bob, edited' } });
    });

    it('lets an editor delete but not rewrite another member’s comment (policy: update is owner or admin)', async () => {
      const comment = await createComment(t, await alice.token(), alicePublished.id, 'moderate me');
      const token = await editor.token();
      expectError(await t.request({ method: 'PUT', url: `/v1/comments/${comment.id}`, token, body: { body: 'rewritten' } }), 404, NOT_FOUND, null);
      const del = await t.request({ method: 'DELETE', url: `/v1/comments/${comment.id}`, token });
      expect({ status: del.statusCode, body: del.body }).toEqual({ status: 204, body: '' });
      expectError(await t.request({ url: `/v1/comments/${comment.id}`, token: await alice.token() }), 404, NOT_FOUND, null);
    });
  });

  describe('expand embeds only what the caller may read', () => {
    it('leaves author out when a member reads another member’s post with expand=author and expand[]=author', async () => {
      const token = await bob.token();
      expectPrivateJson(await t.request({ url: `/v1/posts/${alicePublished.id}?expand=author`, token }), alicePublished);
      expectPrivateJson(await t.request({ url: `/v1/posts/${alicePublished.id}?expand[]=author`, token }), alicePublished);
    });

    it('embeds the author when a member reads their own post', async () => {
      const token = await alice.token();
      const author = await readUser(t, alice.id);
      expectPrivateJson(await t.request({ url: `/v1/posts/${alicePublished.id}?expand=author`, token }), { ...alicePublished, author });
      expectPrivateJson(await t.request({ url: `/v1/posts/${alicePublished.id}?expand[]=author`, token }), { ...alicePublished, author });
    });

    it('embeds any author for an editor', async () => {
      const author = await readUser(t, alice.id);
      expectPrivateJson(await t.request({ url: `/v1/posts/${aliceDraft.id}?expand=author`, token: await editor.token() }), { ...aliceDraft, author });
    });

    it('embeds the author per item in a list: only the caller’s own for a member', async () => {
      const token = await bob.token();
      const bobUser = await readUser(t, bob.id);
      const res = await t.request({ url: `/v1/posts?expand=author&status=published`, token });
      expect(res.statusCode, res.body).toBe(200);
      const data = (res.json() as { data: (PostView & { author?: unknown })[] }).data;
      expect(data.find((p) => p.id === alicePublished.id)).toEqual(alicePublished);
      expect(data.find((p) => p.id === bobPublished.id)).toEqual({ ...bobPublished, author: bobUser });
      for (const post of data) expect('author' in post).toBe(post.authorId === bob.id);
    });

    it('embeds a comment’s post and own author with expand=author&expand=post, and with expand[]', async () => {
      const token = await bob.token();
      const comment = await createComment(t, token, alicePublished.id, 'bob on alice');
      const bobUser = await readUser(t, bob.id);
      const full = { ...comment, author: bobUser, post: alicePublished };
      expectPrivateJson(await t.request({ url: `/v1/comments/${comment.id}?expand=author&expand=post`, token }), full);
      expectPrivateJson(await t.request({ url: `/v1/comments/${comment.id}?expand[]=author&expand[]=post`, token }), full);
      expectPrivateJson(await t.request({ url: `/v1/comments/${comment.id}?expand[]=post`, token }), { ...comment, post: alicePublished });
      expectPrivateJson(await t.request({ url: `/v1/comments/${comment.id}?expand=author&expand[]=post`, token }), full);
    });

    it('leaves out the author of another member’s comment but embeds its post', async () => {
      const comment = await createComment(t, await bob.token(), alicePublished.id, 'bob again');
      const token = await alice.token();
      expectPrivateJson(await t.request({ url: `/v1/comments/${comment.id}?expand=author&expand=post`, token }), { ...comment, post: alicePublished });
    });

    it('applies the same read checks to expand on a post’s comment list', async () => {
      const post = await createPost(t, await alice.token(), { title: 'thread', status: 'published' });
      const mine = await createComment(t, await bob.token(), post.id, 'mine');
      const theirs = await createComment(t, await alice.token(), post.id, 'theirs');
      const bobUser = await readUser(t, bob.id);
      expectPrivateJson(await t.request({ url: `/v1/posts/${post.id}/comments?expand[]=author`, token: await bob.token() }), {
        data: [{ ...mine, author: bobUser }, theirs],
        page: { limit: 20, next: null },
      });
    });

    it('rejects an expansion the contract does not offer', async () => {
      const res = await t.request({ url: `/v1/posts/${alicePublished.id}?expand=comments`, token: await bob.token() });
      expectError(res, 400, {
        error: {
          code: 'VALIDATION_FAILED',
          message: 'The request does not match the contract.',
          details: [{ path: '/query/expand/0', message: 'must be one of author' }],
        },
      });
    });

    it('takes expand as a repeated parameter (explode: true), so the comma form is not a list of names', async () => {
      const comment = await createComment(t, await bob.token(), alicePublished.id, 'comma');
      const res = await t.request({ url: `/v1/comments/${comment.id}?expand=author,post`, token: await bob.token() });
      expectError(res, 400, {
        error: {
          code: 'VALIDATION_FAILED',
          message: 'The request does not match the contract.',
          details: [{ path: '/query/expand/0', message: 'must be one of author, post' }],
        },
      });
    });
  });
});
