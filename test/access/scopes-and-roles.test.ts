import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_KINDS } from '../helpers/databases.js';
import type { TestApp, TestUser } from '../helpers/app.js';
import { FORBIDDEN, createPost, expectError, insufficientScope, readUser, scopeChallenge, startAccessApp, type PostView } from './support.js';

describe.each(DATABASE_KINDS)('coarse authorization: scopes, then roles, on %s', (kind) => {
  let t: TestApp;
  let member: TestUser;
  let editor: TestUser;
  let post: PostView;

  beforeAll(async () => {
    t = await startAccessApp(kind);
    member = await t.createUser('member');
    editor = await t.createUser('editor');
    post = await createPost(t, await member.token(), { title: 'published', status: 'published' });
  });
  afterAll(async () => {
    await t?.close();
  });

  async function count(table: 'posts' | 'users' | 'clients' | 'comments'): Promise<number> {
    const row = await t.database.db.kysely.selectFrom(table).select((eb) => eb.fn.countAll<string | number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  describe('scopes (seed OAuth rule 5: reads and writes alike)', () => {
    it('refuses POST /v1/posts to a token with only read:posts, naming write:posts, and creates nothing', async () => {
      const token = await member.token(['read:posts']);
      const before = await count('posts');
      const res = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'x', body: 'y', status: 'published' } });
      expectError(res, 403, insufficientScope('write:posts'), scopeChallenge('write:posts'));
      expect(await count('posts')).toBe(before);
    });

    it('refuses PUT and DELETE of the caller’s own post to a read-only token, leaving it unchanged', async () => {
      const own = await createPost(t, await member.token(), { title: 'mine', status: 'published' });
      const token = await member.token(['read:posts']);
      const put = await t.request({ method: 'PUT', url: `/v1/posts/${own.id}`, token, body: { title: 'changed', body: 'y', status: 'draft' } });
      expectError(put, 403, insufficientScope('write:posts'), scopeChallenge('write:posts'));
      const del = await t.request({ method: 'DELETE', url: `/v1/posts/${own.id}`, token });
      expectError(del, 403, insufficientScope('write:posts'), scopeChallenge('write:posts'));
      const read = await t.request({ url: `/v1/posts/${own.id}`, token });
      expect({ status: read.statusCode, body: read.json() }).toEqual({ status: 200, body: own });
    });

    it('refuses a read to a token without the read scope (a write scope does not imply it)', async () => {
      const token = await member.token(['write:posts', 'write:comments']);
      expectError(await t.request({ url: '/v1/posts', token }), 403, insufficientScope('read:posts'), scopeChallenge('read:posts'));
      expectError(await t.request({ url: `/v1/posts/${post.id}`, token }), 403, insufficientScope('read:posts'), scopeChallenge('read:posts'));
      expectError(await t.request({ url: `/v1/users/${member.id}/posts`, token }), 403, insufficientScope('read:posts'), scopeChallenge('read:posts'));
      expectError(await t.request({ url: `/v1/posts/${post.id}/comments`, token }), 403, insufficientScope('read:comments'), scopeChallenge('read:comments'));
    });

    it('needs read:users to read even the caller’s own profile', async () => {
      const token = await member.token(['read:posts']);
      expectError(await t.request({ url: `/v1/users/${member.id}`, token }), 403, insufficientScope('read:users'), scopeChallenge('read:users'));
    });

    it('needs read:schema for GET /v1/graphql', async () => {
      const token = await member.token(['read:posts']);
      expectError(await t.request({ url: '/v1/graphql', token }), 403, insufficientScope('read:schema'), scopeChallenge('read:schema'));
    });

    it('refuses a token with no scopes at all', async () => {
      const token = await member.token([]);
      expectError(await t.request({ url: '/v1/posts', token }), 403, insufficientScope('read:posts'), scopeChallenge('read:posts'));
    });

    it('checks the scope before the resource: a missing id is 403, not 404, without the scope', async () => {
      const token = await member.token(['read:comments']);
      expectError(await t.request({ url: '/v1/posts/does-not-exist', token }), 403, insufficientScope('read:posts'), scopeChallenge('read:posts'));
    });

    it('checks the scope before validating the body', async () => {
      const token = await member.token(['read:posts']);
      const res = await t.request({ method: 'POST', url: '/v1/posts', token, body: { nonsense: true } });
      expectError(res, 403, insufficientScope('write:posts'), scopeChallenge('write:posts'));
    });

    it('checks the scope before the role: even an admin client needs write:clients to register a client', async () => {
      const token = await t.adminClientToken('read:clients');
      const before = await count('clients');
      const res = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token,
        body: { name: 'x', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member' },
      });
      expectError(res, 403, insufficientScope('write:clients'), scopeChallenge('write:clients'));
      expect(await count('clients')).toBe(before);
    });

    it('reports the missing scope, not FORBIDDEN, when a member lacks both the scope and the role', async () => {
      const token = await member.token(['read:posts']);
      const res = await t.request({ method: 'POST', url: '/v1/users', token, body: { email: 'x@example.com', name: 'X', role: 'member', password: 'long-enough-password' } });
      expectError(res, 403, insufficientScope('write:users'), scopeChallenge('write:users'));
    });

    it('lets a token with exactly the scope through', async () => {
      const token = await member.token(['read:posts']);
      const res = await t.request({ url: `/v1/posts/${post.id}`, token });
      expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: post });
    });
  });

  describe('roles (seed authorization rule 3)', () => {
    it('refuses GET /v1/clients to a member holding every scope', async () => {
      expectError(await t.request({ url: '/v1/clients', token: await member.token() }), 403, FORBIDDEN, null);
    });

    it('refuses GET /v1/clients/{id} to a member before looking the client up', async () => {
      const clients = await t.request({ url: '/v1/clients', token: await t.adminClientToken() });
      const id = (clients.json() as { data: { id: string }[] }).data[0]!.id;
      expectError(await t.request({ url: `/v1/clients/${id}`, token: await member.token() }), 403, FORBIDDEN, null);
      expectError(await t.request({ url: '/v1/clients/does-not-exist', token: await member.token() }), 403, FORBIDDEN, null);
    });

    it('refuses POST /v1/users to a member and creates nobody', async () => {
      const before = await count('users');
      const res = await t.request({
        method: 'POST',
        url: '/v1/users',
        token: await member.token(),
        body: { email: `sneaky-${Date.now()}@example.com`, name: 'Sneaky', role: 'admin', password: 'long-enough-password' },
      });
      expectError(res, 403, FORBIDDEN, null);
      expect(await count('users')).toBe(before);
    });

    it('refuses DELETE /v1/users/{id} to a member, for another user and for themselves, deleting nobody', async () => {
      const other = await t.createUser('member');
      const token = await member.token();
      expectError(await t.request({ method: 'DELETE', url: `/v1/users/${other.id}`, token }), 403, FORBIDDEN, null);
      expectError(await t.request({ method: 'DELETE', url: `/v1/users/${member.id}`, token }), 403, FORBIDDEN, null);
      expect((await readUser(t, other.id)).id).toBe(other.id);
      expect((await readUser(t, member.id)).id).toBe(member.id);
    });

    it('refuses POST /v1/clients to an editor holding every scope, registering nothing', async () => {
      const before = await count('clients');
      const res = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token: await editor.token(),
        body: { name: 'Editor app', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:users'], role: 'admin' },
      });
      expectError(res, 403, FORBIDDEN, null);
      expect(await count('clients')).toBe(before);
    });

    it('refuses user management to an editor (no create_user / delete_user)', async () => {
      const token = await editor.token();
      const other = await t.createUser('member');
      expectError(
        await t.request({ method: 'POST', url: '/v1/users', token, body: { email: `e-${Date.now()}@example.com`, name: 'E', role: 'member', password: 'long-enough-password' } }),
        403,
        FORBIDDEN,
        null,
      );
      expectError(await t.request({ method: 'DELETE', url: `/v1/users/${other.id}`, token }), 403, FORBIDDEN, null);
    });

    it('applies the role of a client-credentials client (a member-role service cannot list clients)', async () => {
      const admin = await t.adminClientToken();
      const created = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token: admin,
        body: { name: 'Member service', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:clients', 'read:posts'], role: 'member' },
      });
      expect(created.statusCode, created.body).toBe(201);
      const { clientId, clientSecret } = created.json() as { clientId: string; clientSecret: string };
      const issued = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }).toString(),
      });
      expect(issued.statusCode, issued.body).toBe(200);
      const token = (JSON.parse(issued.body) as { access_token: string }).access_token;
      expectError(await t.request({ url: '/v1/clients', token }), 403, FORBIDDEN, null);
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200);
    });

    it('lets an admin user do what a member may not', async () => {
      const admin = await t.createUser('admin');
      const res = await t.request({ url: '/v1/clients', token: await admin.token() });
      expect(res.statusCode, res.body).toBe(200);
    });
  });
});
