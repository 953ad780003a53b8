/**
 * Negative tests named after the OWASP API Security Top 10 (2023) risks the policy layer exists to stop:
 * API1 broken object-level authorization, API3 broken object-property-level authorization (mass assignment
 * and excessive data exposure), API5 broken function-level authorization.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_KINDS } from '../helpers/databases.js';
import type { TestApp, TestUser } from '../helpers/app.js';
import { FORBIDDEN, NOT_FOUND, createComment, createPost, expectError, expectPrivateJson, startAccessApp, type PostView } from './support.js';

/** Errors on the unprefixed path come in the vendor media type the client asked for. */
function expectVersionedError(res: Awaited<ReturnType<TestApp['request']>>, attempt: { headers?: Record<string, string> }, status: number, body: unknown): void {
  if (!attempt.headers?.accept) return expectError(res, status, body);
  expect({ status: res.statusCode, body: res.json(), type: res.headers['content-type'] }).toEqual({
    status,
    body,
    type: 'application/vnd.portcullis+json; version=1',
  });
}

describe.each(DATABASE_KINDS)('OWASP API Top 10 (2023) on %s', (kind) => {
  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;
  let aliceToken: string;
  let bobToken: string;
  let bobsDraft: PostView;
  let bobsPublished: PostView;
  let adminToken: string;

  beforeAll(async () => {
    t = await startAccessApp(kind);
    alice = await t.createUser('member');
    bob = await t.createUser('member');
    aliceToken = await alice.token();
    bobToken = await bob.token();
    adminToken = await t.adminClientToken();
    bobsDraft = await createPost(t, bobToken, { title: 'secret plans', status: 'draft' });
    bobsPublished = await createPost(t, bobToken, { title: 'hello', status: 'published' });
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('API1: object-level authorization', () => {
    it("answers every way of reaching someone else's hidden object with the same 404", async () => {
      const comment = await createComment(t, bobToken, bobsDraft.id, 'note to self');
      const attempts = [
        { url: `/v1/posts/${bobsDraft.id}` },
        { url: `/posts/${bobsDraft.id}`, headers: { accept: 'application/vnd.portcullis+json; version=1' } },
        { method: 'PUT', url: `/v1/posts/${bobsDraft.id}`, body: { title: 'mine now', body: 'x', status: 'published' } },
        { method: 'DELETE', url: `/v1/posts/${bobsDraft.id}` },
        { url: `/v1/posts/${bobsDraft.id}/comments` },
        { method: 'POST', url: `/v1/posts/${bobsDraft.id}/comments`, body: { body: 'hi' } },
        { url: `/v1/comments/${comment.id}` },
        { method: 'DELETE', url: `/v1/comments/${comment.id}` },
        { url: `/v1/users/${bob.id}` },
        { method: 'PUT', url: `/v1/users/${bob.id}`, body: { email: bob.email, name: 'pwned', role: 'member', active: true } },
      ];
      for (const attempt of attempts) expectVersionedError(await t.request({ ...attempt, token: aliceToken }), attempt, 404, NOT_FOUND);
      const stillThere = await t.request({ url: `/v1/posts/${bobsDraft.id}`, token: bobToken });
      expect(stillThere.json()).toEqual(bobsDraft);
    });

    it("never lists someone else's hidden objects, whatever the filters", async () => {
      expectPrivateJson(await t.request({ url: `/v1/posts?authorId=${bob.id}&status=draft`, token: aliceToken }), { data: [], page: { limit: 20, next: null } });
      // Under a parent the caller may not read, a nested collection answers the parent's 404.
      expectError(await t.request({ url: `/v1/users/${bob.id}/posts?status=draft`, token: aliceToken }), 404, NOT_FOUND);
    });
  });

  describe('API3: object-property-level authorization', () => {
    it("never shows a member another user's email, directly, in lists or through expansion", async () => {
      const users = await t.request({ url: '/v1/users?limit=100', token: aliceToken });
      expect(users.json().data.map((u: { id: string }) => u.id)).toEqual([alice.id]);
      const expanded = await t.request({ url: `/v1/posts/${bobsPublished.id}?expand=author`, token: aliceToken });
      expect(expanded.json()).toEqual(bobsPublished);
      const listed = await t.request({ url: `/v1/posts?authorId=${bob.id}&expand[]=author`, token: aliceToken });
      expect(listed.json().data).toEqual([bobsPublished]);
      expect(JSON.stringify([users.json(), expanded.json(), listed.json()])).not.toContain(bob.email);
    });

    it('embeds a related resource only for a token that could read it directly: its scope, then its rule', async () => {
      const editor = await t.createUser('editor');
      const comment = await createComment(t, bobToken, bobsPublished.id, 'a comment');
      const postsOnly = await editor.token(['read:posts']);
      // The editor may read Bob's profile, but this token lacks read:users: no author embedded, as GET /v1/users/{id} is 403.
      expectError(await t.request({ url: `/v1/users/${bob.id}`, token: postsOnly }), 403, {
        error: { code: 'INSUFFICIENT_SCOPE', message: 'The access token needs the scope read:users.' },
      });
      expect((await t.request({ url: `/v1/posts/${bobsPublished.id}?expand=author`, token: postsOnly })).json()).toEqual(bobsPublished);
      const listed = await t.request({ url: `/v1/posts?authorId=${bob.id}&expand=author`, token: postsOnly });
      expect(listed.json().data).toEqual([bobsPublished, bobsDraft].sort((a, b) => a.id.localeCompare(b.id)));
      const commentsOnly = await editor.token(['read:comments']);
      expect((await t.request({ url: `/v1/comments/${comment.id}?expand=post&expand=author`, token: commentsOnly })).json()).toEqual(comment);
      // With the scopes, the same requests embed them.
      const both = await editor.token(['read:posts', 'read:users', 'read:comments']);
      const bobUser = (await t.request({ url: `/v1/users/${bob.id}`, token: both })).json();
      expect((await t.request({ url: `/v1/posts/${bobsPublished.id}?expand=author`, token: both })).json()).toEqual({ ...bobsPublished, author: bobUser });
      expect((await t.request({ url: `/v1/comments/${comment.id}?expand=post&expand=author`, token: both })).json()).toEqual({ ...comment, post: bobsPublished, author: bobUser });
    });

    it('refuses to let a caller assign properties it does not own (mass assignment)', async () => {
      const attempts: [string, string, string, unknown, string][] = [
        ['POST', '/v1/posts', aliceToken, { title: 't', body: 'b', status: 'draft', authorId: bob.id }, '/body/authorId'],
        ['POST', '/v1/posts', aliceToken, { title: 't', body: 'b', status: 'draft', id: 'chosen-id' }, '/body/id'],
        ['POST', '/v1/users', adminToken, { email: 'x@example.com', name: 'X', role: 'member', password: 'long-enough-password', id: 'x' }, '/body/id'],
        ['POST', '/v1/clients', adminToken, { name: 'C', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: [], role: 'member', clientSecret: 'mine' }, '/body/clientSecret'],
        ['PUT', `/v1/users/${alice.id}`, aliceToken, { email: alice.email, name: 'A', role: 'member', active: true, createdAt: '2000-01-01T00:00:00.000Z' }, '/body/createdAt'],
      ];
      for (const [method, url, token, body, path] of attempts) {
        expectError(await t.request({ method, url, token, body }), 400, {
          error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path, message: 'is not a known property' }] },
        });
      }
      const escalate = await t.request({ method: 'PUT', url: `/v1/users/${alice.id}`, token: aliceToken, body: { email: alice.email, name: 'A', role: 'admin', active: true } });
      expectError(escalate, 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change role.' } });
      const me = await t.request({ url: `/v1/users/${alice.id}`, token: aliceToken });
      expect(me.json().role).toBe('member');
    });

    it('lets only an admin set a password: a stolen member token cannot take the account over', async () => {
      const hashOf = async (id: string) =>
        (await t.database.db.kysely.selectFrom('users').select('passwordHash').where('id', '=', id).executeTakeFirstOrThrow()).passwordHash;
      const before = await hashOf(alice.id);
      const own = await t.request({
        method: 'PUT',
        url: `/v1/users/${alice.id}`,
        token: aliceToken,
        body: { email: alice.email, name: 'A', role: 'member', active: true, password: 'attacker-chosen-password' },
      });
      expectError(own, 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change password.' } });
      expect(await hashOf(alice.id)).toBe(before);
      const byAdmin = await t.request({
        method: 'PUT',
        url: `/v1/users/${alice.id}`,
        token: adminToken,
        body: { email: alice.email, name: 'A', role: 'member', active: true, password: 'a-new-long-password' },
      });
      expect(byAdmin.statusCode).toBe(200);
      expect(await hashOf(alice.id)).not.toBe(before);
      // A password reset ends the sessions the old password (or a thief) had.
      expect((await t.request({ url: `/v1/users/${alice.id}`, token: aliceToken })).statusCode).toBe(401);
      aliceToken = await alice.token();
    });

    it('never returns a stored secret', async () => {
      const client = await t.request({ method: 'POST', url: '/v1/clients', token: adminToken, body: { name: 'S', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member' } });
      const { id, clientSecret } = client.json();
      for (const url of [`/v1/clients/${id}`, '/v1/clients?limit=100']) {
        const res = await t.request({ url, token: adminToken });
        expect(res.statusCode).toBe(200);
        expect(res.body).not.toContain(clientSecret);
        expect(res.body).not.toMatch(/secret|passwordHash|password/i);
      }
    });
  });

  describe('API5: function-level authorization', () => {
    it('refuses administrative functions to members and editors, on every path form', async () => {
      const editorToken = await (await t.createUser('editor')).token();
      const adminOnly = [
        { url: '/v1/clients' },
        { method: 'POST', url: '/v1/clients', body: { name: 'C', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: [], role: 'admin' } },
        { method: 'POST', url: '/v1/users', body: { email: 'new@example.com', name: 'N', role: 'admin', password: 'long-enough-password' } },
        { method: 'DELETE', url: `/v1/users/${bob.id}` },
        { url: '/v1/audit-events' },
        { url: '/clients', headers: { accept: 'application/vnd.portcullis+json; version=1' } },
      ];
      for (const token of [aliceToken, editorToken]) {
        for (const attempt of adminOnly) expectVersionedError(await t.request({ ...attempt, token }), attempt, 403, FORBIDDEN);
      }
      const users = await t.database.db.kysely.selectFrom('users').select('email').where('email', '=', 'new@example.com').execute();
      expect(users).toEqual([]);
    });
  });
});
