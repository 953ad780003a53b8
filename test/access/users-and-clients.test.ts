import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '../../src/errors/registry.js';
import { digestSecret } from '../../src/oauth/secrets.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { ADMIN_CLIENT_ID, type TestApp, type TestUser } from '../helpers/app.js';
import { fillPasswordWork } from '../helpers/password-work.js';
import { FORBIDDEN, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE, JSON_TYPE, NOT_FOUND, REALM, createComment, createPost, expectError, expectPrivateJson, insufficientScope, readUser, scopeChallenge, startAccessApp } from './support.js';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function unknownProperty(path: string) {
  return { error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path, message: 'is not a known property' }] } };
}

describe.each(DATABASE_KINDS)('users and clients on %s', (kind) => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    t = await startAccessApp(kind);
    admin = await t.adminClientToken();
  });
  afterAll(async () => {
    await t?.close();
  });

  async function count(table: 'posts' | 'users' | 'clients' | 'comments'): Promise<number> {
    const row = await t.database.db.kysely.selectFrom(table).select((eb) => eb.fn.countAll<string | number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  function profile(user: Record<string, unknown>, changes: Record<string, unknown> = {}) {
    return { email: user.email, name: user.name, role: user.role, active: user.active, ...changes };
  }

  describe('property-level authorization and mass assignment', () => {
    let member: TestUser;
    beforeAll(async () => {
      member = await t.createUser('member');
    });

    it('lets a member replace their own name', async () => {
      const before = await readUser(t, member.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: await member.token(), body: profile(before, { name: 'New Name' }) });
      expect(res.statusCode, res.body).toBe(200);
      const updated = res.json() as Record<string, unknown>;
      expect(updated).toEqual({ ...before, name: 'New Name', updatedAt: expect.stringMatching(ISO) });
      expect(await readUser(t, member.id)).toEqual(updated);
    });

    it('refuses a member changing their own email with 403 FORBIDDEN (the account page does, with the password), changing nothing', async () => {
      const before = await readUser(t, member.id);
      for (const method of ['PUT', 'PATCH'] as const) {
        const email = `moved-${member.id}@example.com`;
        const body = method === 'PUT' ? profile(before, { email, name: 'Moved' }) : { email, name: 'Moved' };
        const headers: Record<string, string> = method === 'PATCH' ? { 'content-type': 'application/merge-patch+json' } : {};
        const res = await t.request({ method, url: `/v1/users/${member.id}`, token: await member.token(), body, headers });
        expectError(res, 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change email.' } }, null);
      }
      expect(await readUser(t, member.id)).toEqual(before);
    });

    it('accepts a member’s PUT that repeats their current role and active flag unchanged', async () => {
      const before = await readUser(t, member.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: await member.token(), body: profile(before) });
      expect(res.statusCode, res.body).toBe(200);
    });

    it('refuses a member changing their own role with 403 FORBIDDEN, changing nothing (not even the name sent alongside)', async () => {
      const before = await readUser(t, member.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: await member.token(), body: profile(before, { role: 'admin', name: 'Sneaky' }) });
      expectError(res, 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change role.' } }, null);
      expect(await readUser(t, member.id)).toEqual(before);
      // and the token still acts as a member
      expectError(await t.request({ url: '/v1/clients', token: await member.token() }), 403, FORBIDDEN, null);
    });

    it('refuses a member changing their own active flag with 403 FORBIDDEN, changing nothing', async () => {
      const before = await readUser(t, member.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: await member.token(), body: profile(before, { active: false }) });
      expectError(res, 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change active.' } }, null);
      expect(await readUser(t, member.id)).toEqual(before);
    });

    it('names every protected field refused at once', async () => {
      const before = await readUser(t, member.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: await member.token(), body: profile(before, { role: 'editor', active: false }) });
      expectError(res, 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change role, active.' } }, null);
      expect(await readUser(t, member.id)).toEqual(before);
    });

    it("records a refused protected field as the role's denial, over PUT, PATCH and GraphQL; an allowed change as allowed", async () => {
      const before = await readUser(t, member.id);
      const token = await member.token();
      const mutation = 'mutation ($id: ID!, $input: UserReplaceInput!) { replaceUser(id: $id, input: $input) { id role } }';
      const attempts = [
        await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token, body: profile(before, { role: 'admin' }) }),
        await t.request({ method: 'PATCH', url: `/v1/users/${member.id}`, token, body: { role: 'admin' }, headers: { 'content-type': 'application/merge-patch+json' } }),
        await t.request({ method: 'POST', url: '/graphql', token, body: { query: mutation, variables: { id: member.id, input: profile(before, { role: 'admin' }) } } }),
      ];
      expectError(attempts[0]!, 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change role.' } }, null);
      expectError(attempts[1]!, 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change role.' } }, null);
      const graphql = attempts[2]!.json() as { data: unknown; errors: { message: string; path: string[]; extensions: { code: string } }[] };
      expect({ status: attempts[2]!.statusCode, data: graphql.data, errors: graphql.errors.map(({ message, path, extensions }) => ({ message, path, code: extensions.code })) }).toEqual({
        status: 403,
        data: null,
        errors: [{ message: 'Your role may not change role.', path: ['replaceUser'], code: 'FORBIDDEN' }],
      });
      // A null for a field the view never shows (the password) changes nothing: not refused as the role's
      // (a merge patch removes it; GraphQL's input then fails the contract, as REST's PUT body would).
      const unchanged = await t.request({ method: 'PATCH', url: `/v1/users/${member.id}`, token, body: { password: null }, headers: { 'content-type': 'application/merge-patch+json' } });
      expect(unchanged.statusCode, unchanged.body).toBe(200);
      const nullPassword = await t.request({ method: 'POST', url: '/graphql', token, body: { query: mutation, variables: { id: member.id, input: { ...profile(before), password: null } } } });
      expect((nullPassword.json() as { errors: { extensions: { code: string } }[] }).errors.map((e) => e.extensions.code)).toEqual(['VALIDATION_FAILED']);
      await t.app.audit.flush();
      const decisions = async (res: (typeof attempts)[number]) =>
        t.database.db.kysely
          .selectFrom('auditEvents')
          .select(['subject', 'interface', 'operation', 'resourceType', 'resourceId', 'decision', 'reason'])
          .where('requestId', '=', String(res.headers['x-request-id']))
          .execute();
      expect(await decisions(attempts[0]!)).toEqual([{ subject: member.id, interface: 'rest', operation: 'replaceUser', resourceType: 'user', resourceId: member.id, decision: 'deny', reason: 'role' }]);
      expect(await decisions(attempts[1]!)).toEqual([{ subject: member.id, interface: 'rest', operation: 'updateUser', resourceType: 'user', resourceId: member.id, decision: 'deny', reason: 'role' }]);
      expect(await decisions(attempts[2]!)).toEqual([
        { subject: member.id, interface: 'graphql', operation: 'Mutation.replaceUser', resourceType: 'user', resourceId: member.id, decision: 'deny', reason: 'role' },
      ]);
      expect(await decisions(unchanged)).toEqual([{ subject: member.id, interface: 'rest', operation: 'updateUser', resourceType: 'user', resourceId: member.id, decision: 'allow', reason: 'resource' }]);
      expect(await readUser(t, member.id)).toEqual({ ...before, updatedAt: expect.any(String) });
    });

    it('answers a member’s PUT of another user’s profile with 404, changing nothing', async () => {
      const other = await t.createUser('member');
      const before = await readUser(t, other.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${other.id}`, token: await member.token(), body: profile(before, { name: 'Taken over' }) });
      expectError(res, 404, NOT_FOUND, null);
      expect(await readUser(t, other.id)).toEqual(before);
    });

    it('does not tell a member whether an email has an account: another account\'s email is 403 as any other', async () => {
      const other = await t.createUser('member');
      const before = await readUser(t, member.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: await member.token(), body: profile(before, { email: other.email }) });
      expectError(res, 403, { error: { code: 'FORBIDDEN', message: 'Your role may not change email.' } }, null);
      expect(await readUser(t, member.id)).toEqual(before);
    });

    it('refuses an admin giving a user another account’s email with 409, changing nothing', async () => {
      const other = await t.createUser('member');
      const before = await readUser(t, member.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: admin, body: profile(before, { email: other.email }) });
      expectError(res, 409, { error: { code: 'CONFLICT', message: 'A user with this email already exists.' } }, null);
      expect(await readUser(t, member.id)).toEqual(before);
    });

    it('lets an admin change a member’s role', async () => {
      const other = await t.createUser('member');
      const before = await readUser(t, other.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${other.id}`, token: admin, body: profile(before, { role: 'editor' }) });
      expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: { ...before, role: 'editor', updatedAt: expect.stringMatching(ISO) } });
    });

    it('rejects an unknown property (isAdmin) on PUT /v1/users with 400, changing nothing', async () => {
      const before = await readUser(t, member.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: await member.token(), body: { ...profile(before, { name: 'Admin?' }), isAdmin: true } });
      expectError(res, 400, unknownProperty('/body/isAdmin'));
      expect(await readUser(t, member.id)).toEqual(before);
    });

    it('rejects id and createdAt in a PUT /v1/users body', async () => {
      const before = await readUser(t, member.id);
      const res = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: admin, body: { ...profile(before), id: 'other-id' } });
      expectError(res, 400, unknownProperty('/body/id'));
      const res2 = await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: admin, body: { ...profile(before), createdAt: '2000-01-01T00:00:00.000Z' } });
      expectError(res2, 400, unknownProperty('/body/createdAt'));
      expect(await readUser(t, member.id)).toEqual(before);
    });

    it('rejects authorId on POST /v1/posts with 400 and creates nothing', async () => {
      const victim = await t.createUser('member');
      const before = await count('posts');
      const res = await t.request({ method: 'POST', url: '/v1/posts', token: await member.token(), body: { title: 'forged', body: 'x', status: 'published', authorId: victim.id } });
      expectError(res, 400, unknownProperty('/body/authorId'));
      expect(await count('posts')).toBe(before);
    });

    it('rejects authorId on PUT /v1/posts/{id} with 400, the author unchanged', async () => {
      const victim = await t.createUser('member');
      const token = await member.token();
      const post = await createPost(t, token, { title: 'mine', status: 'published' });
      const res = await t.request({ method: 'PUT', url: `/v1/posts/${post.id}`, token, body: { title: 'mine', body: 'x', status: 'published', authorId: victim.id } });
      expectError(res, 400, unknownProperty('/body/authorId'));
      expect((await t.request({ url: `/v1/posts/${post.id}`, token })).json()).toEqual(post);
    });

    it('rejects authorId and postId in a comment body with 400 and creates nothing', async () => {
      const token = await member.token();
      const post = await createPost(t, token, { title: 'thread', status: 'published' });
      const other = await createPost(t, token, { title: 'other thread', status: 'published' });
      const before = await count('comments');
      expectError(await t.request({ method: 'POST', url: `/v1/posts/${post.id}/comments`, token, body: { body: 'x', authorId: 'someone' } }), 400, unknownProperty('/body/authorId'));
      expectError(await t.request({ method: 'POST', url: `/v1/posts/${post.id}/comments`, token, body: { body: 'x', postId: other.id } }), 400, unknownProperty('/body/postId'));
      expect(await count('comments')).toBe(before);
    });

    it('records the caller as the author of every post and comment it creates', async () => {
      const token = await member.token();
      const post = await createPost(t, token, { title: 'authored', status: 'draft' });
      expect(post).toEqual({
        id: expect.any(String),
        authorId: member.id,
        title: 'authored',
        body: 'text',
        status: 'draft',
        createdAt: expect.stringMatching(ISO),
        updatedAt: post.createdAt,
      });
      const comment = await createComment(t, token, post.id, 'hi');
      expect(comment).toEqual({ id: expect.any(String), postId: post.id, authorId: member.id, body: 'hi', createdAt: expect.stringMatching(ISO) });
      // A client's posts are authored by its registration id, never by its (admin-chosen) client_id.
      const registration = await t.database.db.kysely.selectFrom('clients').select('id').where('clientId', '=', ADMIN_CLIENT_ID).executeTakeFirstOrThrow();
      const byClient = await createPost(t, admin, { title: 'by the admin client', status: 'published' });
      expect(byClient.authorId).toBe(registration.id);
    });

    it('refuses text that cannot be stored as sent (NUL) with 400 naming the body path, creating nothing', async () => {
      const before = await count('posts');
      const res = await t.request({ method: 'POST', url: '/v1/posts', token: await member.token(), body: { title: 'nul', body: 'a\u0000b', status: 'draft' } });
      expectError(res, 400, {
        error: {
          code: 'VALIDATION_FAILED',
          message: 'The request contains text that is not valid Unicode.',
          details: [{ path: '/body/body', message: 'contains a NUL character or an unpaired surrogate' }],
        },
      });
      expect(await count('posts')).toBe(before);
    });

    it('defaults a new post to draft when status is omitted', async () => {
      const token = await member.token();
      const res = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'no status', body: 'x' } });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().status).toBe('draft');
    });
  });

  describe('admin: users', () => {
    it('creates a user: 201, Location, the password never returned nor stored in clear', async () => {
      const email = `new-${Date.now()}@example.com`;
      const password = 'a-long-enough-password';
      const res = await t.request({ method: 'POST', url: '/v1/users', token: admin, body: { email, name: 'New User', role: 'member', password } });
      expect(res.statusCode, res.body).toBe(201);
      const user = res.json() as Record<string, unknown>;
      expect(user).toEqual({
        id: expect.any(String),
        email,
        name: 'New User',
        role: 'member',
        active: true,
        createdAt: expect.stringMatching(ISO),
        updatedAt: user.createdAt,
      });
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.headers.location).toBe(`/v1/users/${String(user.id)}`);
      expect(res.body).not.toContain(password);
      expect(res.body).not.toMatch(/password/i);
      const read = await t.request({ url: res.headers.location as string, token: admin });
      expectPrivateJson(read, user);
      const row = await t.database.db.kysely.selectFrom('users').select('passwordHash').where('id', '=', String(user.id)).executeTakeFirstOrThrow();
      expect(row.passwordHash).not.toContain(password);
      expect(row.passwordHash.length).toBeGreaterThan(password.length);
    });

    it('answers 503 UNAVAILABLE with Retry-After, creating nobody, while the process hashes as many passwords as it may', async () => {
      const filled = fillPasswordWork();
      try {
        const before = await count('users');
        const email = `refused-${Date.now()}@example.com`;
        const res = await t.request({ method: 'POST', url: '/v1/users', token: admin, body: { email, name: 'Refused', role: 'member', password: 'a-long-enough-password' } });
        expectError(res, 503, { error: { code: 'UNAVAILABLE', message: 'Too many passwords are being checked at the moment; retry shortly.' } });
        expect(res.headers['retry-after']).toBe(String(UNAVAILABLE_RETRY_AFTER_SECONDS));
        expect(await count('users')).toBe(before);
      } finally {
        await filled.release();
      }
    });

    it('refuses a duplicate email with 409 CONFLICT, creating nobody', async () => {
      const existing = await t.createUser('member');
      const before = await count('users');
      const res = await t.request({ method: 'POST', url: '/v1/users', token: admin, body: { email: existing.email, name: 'Dup', role: 'admin', password: 'a-long-enough-password' } });
      expectError(res, 409, { error: { code: 'CONFLICT', message: 'A user with this email already exists.' } });
      expect(await count('users')).toBe(before);
    });

    it('refuses an email that differs from an existing one only in case', async () => {
      const existing = await t.createUser('member');
      const res = await t.request({ method: 'POST', url: '/v1/users', token: admin, body: { email: existing.email.toUpperCase(), name: 'Look-alike', role: 'member', password: 'a-long-enough-password' } });
      expectError(res, 409, { error: { code: 'CONFLICT', message: 'A user with this email already exists.' } });
    });

    it('refuses a password shorter than 12 characters', async () => {
      const res = await t.request({ method: 'POST', url: '/v1/users', token: admin, body: { email: `short-${Date.now()}@example.com`, name: 'S', role: 'member', password: 'short' } });
      expectError(res, 400, {
        error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path: '/body/password', message: 'must NOT have fewer than 12 characters' }] },
      });
    });
  });

  describe('admin: clients', () => {
    it('a client whose client_id equals a user id owns nothing of that user', async () => {
      const victim = await t.createUser('member');
      const post = await createPost(t, await victim.token(), { title: 'mine', status: 'draft' });
      const created = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token: admin,
        body: { clientId: victim.id, name: 'Impostor', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts', 'write:posts', 'read:users', 'write:users'], role: 'member' },
      });
      expect(created.statusCode, created.body).toBe(201);
      const { clientSecret } = created.json() as { clientSecret: string };
      const issued = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ grant_type: 'client_credentials', client_id: victim.id, client_secret: clientSecret }).toString(),
      });
      expect(issued.statusCode, issued.body).toBe(200);
      const impostor = (JSON.parse(issued.body) as { access_token: string }).access_token;
      expectError(await t.request({ url: `/v1/posts/${post.id}`, token: impostor }), 404, NOT_FOUND);
      expectError(await t.request({ method: 'DELETE', url: `/v1/posts/${post.id}`, token: impostor }), 404, NOT_FOUND);
      expectError(await t.request({ url: `/v1/users/${victim.id}`, token: impostor }), 404, NOT_FOUND);
      const list = await t.request({ url: `/v1/posts?authorId=${victim.id}&status=draft`, token: impostor });
      expect(list.statusCode).toBe(200);
      expect(list.json()).toEqual({ data: [], page: { limit: 20, next: null } });
    });

    const registration = {
      name: 'Reporting service',
      type: 'confidential',
      redirectUris: [],
      grantTypes: ['client_credentials'],
      scopes: ['read:posts', 'read:comments'],
      role: 'member',
    };

    it('returns the client secret once, at creation; GET never returns it; the secret works at the token endpoint', async () => {
      const res = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body: { ...registration, clientId: 'reporting-service' } });
      expect(res.statusCode, res.body).toBe(201);
      const created = res.json() as Record<string, unknown> & { id: string; clientSecret: string };
      expect(created).toEqual({
        id: expect.any(String),
        clientId: 'reporting-service',
        clientSecret: expect.stringMatching(/^[A-Za-z0-9_-]{43,}$/),
        name: 'Reporting service',
        type: 'confidential',
        redirectUris: [],
        postLogoutRedirectUris: [],
        grantTypes: ['client_credentials'],
        scopes: ['read:posts', 'read:comments'],
        role: 'member',
        accessTokenFormat: 'jwt',
        accessTokenTtl: 600,
        rateLimit: null,
        idTokenSignedResponseAlg: 'RS256',
        firstParty: false,
        legacy: false,
        createdAt: expect.stringMatching(ISO),
      });
      expect(res.headers.location).toBe(`/v1/clients/${created.id}`);
      const { clientSecret, ...view } = created;

      const read = await t.request({ url: `/v1/clients/${created.id}`, token: admin });
      expectPrivateJson(read, view);
      expect(read.body).not.toContain(clientSecret);
      const list = await t.request({ url: '/v1/clients?limit=100', token: admin });
      expect(list.statusCode).toBe(200);
      expect((list.json() as { data: unknown[] }).data).toContainEqual(view);
      expect(list.body).not.toContain(clientSecret);
      expect(list.body).not.toMatch(/secret/i);

      const row = await t.database.db.kysely.selectFrom('clients').select('secretHash').where('id', '=', created.id).executeTakeFirstOrThrow();
      expect(row.secretHash).toBe(digestSecret(clientSecret));

      const issued = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`reporting-service:${clientSecret}`).toString('base64')}` },
        payload: 'grant_type=client_credentials&scope=read%3Aposts',
      });
      expect(issued.statusCode, issued.body).toBe(200);
      const token = (JSON.parse(issued.body) as { access_token: string }).access_token;
      const info = await t.request({ url: '/v1/oauth', token });
      expect(info.statusCode, info.body).toBe(200);
      expect(info.json()).toEqual({
        active: true,
        tokenType: 'Bearer',
        format: 'jwt',
        clientId: 'reporting-service',
        subject: 'reporting-service',
        scopes: ['read:posts'],
        grantType: 'client_credentials',
        issuedAt: expect.stringMatching(ISO),
        expiresAt: expect.stringMatching(ISO),
        jti: expect.stringMatching(/^[A-Za-z0-9_-]+$/),
      });

      const wrong = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from('reporting-service:not-the-secret').toString('base64')}` },
        payload: 'grant_type=client_credentials',
      });
      expect({ status: wrong.statusCode, body: JSON.parse(wrong.body) }).toEqual({ status: 401, body: { error: 'invalid_client', error_description: 'Client authentication failed.' } });
    });

    it('refuses a duplicate clientId with 409 CONFLICT', async () => {
      const first = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body: { ...registration, clientId: 'dup-client' } });
      expect(first.statusCode, first.body).toBe(201);
      const before = await count('clients');
      const res = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body: { ...registration, clientId: 'dup-client' } });
      expectError(res, 409, { error: { code: 'CONFLICT', message: 'A client with this clientId already exists.' } });
      expect(await count('clients')).toBe(before);
    });

    it('refuses an unknown scope in a registration with 400, registering nothing', async () => {
      const before = await count('clients');
      const res = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body: { ...registration, scopes: ['read:posts', 'admin:everything'] } });
      expectError(res, 400, {
        error: {
          code: 'VALIDATION_FAILED',
          message: 'The request does not match the contract.',
          details: [
            {
              path: '/body/scopes/1',
              message:
                'must be one of read:users, write:users, read:posts, write:posts, read:comments, write:comments, read:clients, write:clients, read:audit, read:schema, openid, profile, email, offline_access',
            },
          ],
        },
      });
      expect(await count('clients')).toBe(before);
    });

    it('refuses a public client with the client_credentials grant with 400, registering nothing', async () => {
      const before = await count('clients');
      const res = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body: { ...registration, type: 'public' } });
      expectError(res, 400, {
        error: {
          code: 'VALIDATION_FAILED',
          message: 'The client registration is not valid.',
          details: [{ path: '/body/grantTypes', message: 'a public client cannot use client_credentials' }],
        },
      });
      expect(await count('clients')).toBe(before);
    });

    it('gives a public client no secret', async () => {
      const res = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token: admin,
        body: { name: 'SPA', type: 'public', redirectUris: ['https://spa.example.com/cb'], grantTypes: ['authorization_code'], scopes: ['read:posts'] },
      });
      expect(res.statusCode, res.body).toBe(201);
      expect('clientSecret' in res.json()).toBe(false);
      const row = await t.database.db.kysely.selectFrom('clients').select('secretHash').where('id', '=', res.json().id).executeTakeFirstOrThrow();
      expect(row.secretHash).toBeNull();
    });

    async function clientCredentialsToken(client: { clientId: string; clientSecret: string }, scope?: string): Promise<string> {
      const issued = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ grant_type: 'client_credentials', client_id: client.clientId, client_secret: client.clientSecret, ...(scope ? { scope } : {}) }).toString(),
      });
      expect(issued.statusCode, issued.body).toBe(200);
      return (JSON.parse(issued.body) as { access_token: string }).access_token;
    }

    it('applies a client’s new role to its outstanding tokens at once', async () => {
      const created = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body: { ...registration, scopes: ['read:clients'], role: 'admin' } });
      expect(created.statusCode, created.body).toBe(201);
      const client = created.json() as { id: string; clientId: string; clientSecret: string };
      const token = await clientCredentialsToken(client);
      expect((await t.request({ url: `/v1/clients/${client.id}`, token })).statusCode).toBe(200);
      const put = await t.request({
        method: 'PUT',
        url: `/v1/clients/${client.id}`,
        token: admin,
        body: { ...registration, scopes: ['read:clients'], role: 'member', accessTokenFormat: 'jwt', accessTokenTtl: 600, firstParty: false, legacy: false },
      });
      expect(put.statusCode, put.body).toBe(200);
      expectError(await t.request({ url: `/v1/clients/${client.id}`, token }), 403, FORBIDDEN, null);
    });

    it('narrows a client’s outstanding tokens at once when a scope is taken from the client', async () => {
      const created = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body: { ...registration, scopes: ['read:clients', 'read:posts'], role: 'admin' } });
      expect(created.statusCode, created.body).toBe(201);
      const client = created.json() as { id: string; clientId: string; clientSecret: string };
      const token = await clientCredentialsToken(client, 'read:clients read:posts');
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200);
      const put = await t.request({
        method: 'PUT',
        url: `/v1/clients/${client.id}`,
        token: admin,
        body: { ...registration, scopes: ['read:clients'], role: 'admin', accessTokenFormat: 'jwt', accessTokenTtl: 600, firstParty: false, legacy: false },
      });
      expect(put.statusCode, put.body).toBe(200);
      expectError(await t.request({ url: '/v1/posts', token }), 403, insufficientScope('read:posts'), scopeChallenge('read:posts'));
      expect((await t.request({ url: `/v1/clients/${client.id}`, token })).statusCode).toBe(200);
      const shown = await t.request({ url: '/v1/authorization', token });
      expect(shown.json().scopes).toEqual(['read:clients']);
    });

    it('refuses a token of a deleted client whose client_id is registered again, even if nothing revoked it', async () => {
      const body = { ...registration, clientId: `reuse-${kind}`, scopes: ['read:posts'], role: 'member' };
      const first = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body });
      expect(first.statusCode, first.body).toBe(201);
      const old = first.json() as { id: string; clientId: string; clientSecret: string };
      const token = await clientCredentialsToken(old);
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200);
      // Removed behind the server's back (no revocation of its tokens), then registered again as an editor.
      await t.database.db.kysely.deleteFrom('clients').where('id', '=', old.id).execute();
      const second = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body: { ...body, role: 'editor' } });
      expect(second.statusCode, second.body).toBe(201);
      expectError(await t.request({ url: '/v1/posts', token }), 401, INVALID_TOKEN, `${REALM}, error="invalid_token", error_description="The client of the token is no longer registered"`);
    });

    it('refuses a deleted user’s token after another account takes the same email', async () => {
      const departed = await t.createUser('member', { email: `reused-${kind}@example.com` });
      const token = await departed.token(['read:users']);
      expect((await t.request({ url: `/v1/users/${departed.id}`, token })).statusCode).toBe(200);
      const deleted = await t.request({ method: 'DELETE', url: `/v1/users/${departed.id}`, token: admin });
      expect(deleted.statusCode, deleted.body).toBe(204);
      const successor = await t.createUser('admin', { email: `reused-${kind}@example.com` });
      expectError(await t.request({ url: `/v1/users/${successor.id}`, token }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
      expectError(await t.request({ url: `/v1/users/${departed.id}`, token }), 401, INVALID_TOKEN);
    });

    it('deletes a client: 204, then 404', async () => {
      const created = await t.request({ method: 'POST', url: '/v1/clients', token: admin, body: registration });
      expect(created.statusCode, created.body).toBe(201);
      const id = created.json().id as string;
      const del = await t.request({ method: 'DELETE', url: `/v1/clients/${id}`, token: admin });
      expect({ status: del.statusCode, body: del.body }).toEqual({ status: 204, body: '' });
      expect(del.headers['content-type']).toBeUndefined();
      expectError(await t.request({ url: `/v1/clients/${id}`, token: admin }), 404, NOT_FOUND);
      expectError(await t.request({ method: 'DELETE', url: `/v1/clients/${id}`, token: admin }), 404, NOT_FOUND);
    });
  });
});
