import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configFrom } from '../../src/config/config.js';
import { revokeClientTokens } from '../../src/oauth/tokens/access-token-records.js';
import { TokenService } from '../../src/oauth/tokens/token-service.js';
import { SubjectDirectory } from '../../src/pipeline/subject-directory.js';
import { findClientByClientId } from '../../src/storage/clients.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import type { TestApp } from '../helpers/app.js';
import {
  ADMIN_CLIENT_ID,
  INACTIVE_SUBJECT_CHALLENGE,
  INVALID_REQUEST_CHALLENGE,
  INVALID_TOKEN,
  INVALID_TOKEN_CHALLENGE,
  JSON_TYPE,
  REALM,
  UNAUTHENTICATED,
  createPost,
  expectError,
  expectPrivateJson,
  readUser,
  startAccessApp,
} from './support.js';

const PUBLISHED_SPEC = JSON.parse(fs.readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8')) as Record<string, unknown>;

function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function decodePart(part: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
}

describe.each(DATABASE_KINDS)('authentication (pipeline step 2) on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startAccessApp(kind);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function postCount(): Promise<number> {
    const row = await t.database.db.kysely.selectFrom('posts').select((eb) => eb.fn.countAll<string | number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** A token service over the same database and keys whose clock runs `offsetMs` behind. */
  function pastTokenService(offsetMs: number): TokenService {
    const config = configFrom({ DATA_DIR: t.dataDir, ISSUER: 'http://127.0.0.1:3000', KEY_ENCRYPTION_SECRET: 'test-key-encryption-secret-0123456789abcdef' });
    return new TokenService({ db: t.database.db, config, keys: t.app.keys, clock: () => Date.now() - offsetMs });
  }

  describe('missing credentials', () => {
    it('answers a protected read without a token with 401 and a bare Bearer challenge (no error attribute)', async () => {
      const res = await t.request({ url: '/v1/posts' });
      expectError(res, 401, UNAUTHENTICATED, REALM);
    });

    it('answers a protected write without a token with 401 and creates nothing', async () => {
      const before = await postCount();
      const res = await t.request({ method: 'POST', url: '/v1/posts', body: { title: 'anonymous', body: 'x', status: 'published' } });
      expectError(res, 401, UNAUTHENTICATED, REALM);
      expect(await postCount()).toBe(before);
    });

    it('requires a token on an x-authenticated operation (GET /v1/authorization)', async () => {
      expectError(await t.request({ url: '/v1/authorization' }), 401, UNAUTHENTICATED, REALM);
    });
  });

  describe('invalid tokens are 401 invalid_token', () => {
    it('rejects a garbage token', async () => {
      const res = await t.request({ url: '/v1/posts', token: 'not-a-real-token' });
      expectError(res, 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });

    it('rejects a well-formed opaque token the server never issued', async () => {
      const res = await t.request({ url: '/v1/posts', token: randomBytes(32).toString('base64url') });
      expectError(res, 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });

    it('rejects a JWT whose payload was altered (scope escalated), keeping the original signature', async () => {
      const member = await t.createUser('member');
      const token = await member.token(['read:posts']);
      const [header, payload, signature] = token.split('.') as [string, string, string];
      const claims = decodePart(payload);
      const tampered = `${header}.${b64url({ ...claims, scope: 'read:posts write:posts write:users' })}.${signature}`;
      expectError(await t.request({ url: '/v1/posts', token: tampered }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
      // The untampered token still works: the rejection above was about the tampering.
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200);
    });

    it('rejects a JWT whose subject was swapped for an admin, keeping the original signature', async () => {
      const member = await t.createUser('member');
      const admin = await t.createUser('admin');
      const token = await member.token();
      const [header, payload, signature] = token.split('.') as [string, string, string];
      const tampered = `${header}.${b64url({ ...decodePart(payload), sub: admin.id })}.${signature}`;
      expectError(await t.request({ url: '/v1/clients', token: tampered }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });

    it('rejects a JWT with a corrupted signature', async () => {
      const token = await (await t.createUser('member')).token();
      const [header, payload, signature] = token.split('.') as [string, string, string];
      const middle = Math.floor(signature.length / 2);
      const flipped = signature.slice(0, middle) + (signature[middle] === 'A' ? 'B' : 'A') + signature.slice(middle + 1);
      expectError(await t.request({ url: '/v1/posts', token: `${header}.${payload}.${flipped}` }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });

    it('rejects an unsigned JWT (alg none) carrying valid-looking claims', async () => {
      const token = await (await t.createUser('admin')).token();
      const [header, payload] = token.split('.') as [string, string, string];
      const none = `${b64url({ ...decodePart(header), alg: 'none' })}.${payload}.`;
      expectError(await t.request({ url: '/v1/clients', token: none }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });

    it('rejects an expired JWT', async () => {
      const member = await t.createUser('member');
      const client = (await findClientByClientId(t.database.db.kysely, ADMIN_CLIENT_ID))!;
      const issued = await pastTokenService(2 * 3600 * 1000).issueAccessToken({
        client: { ...client, accessTokenFormat: 'jwt' },
        subject: member.id,
        subjectType: 'user',
        scopes: ['read:posts'],
        grantType: 'authorization_code',
      });
      expect(decodePart(issued.accessToken.split('.')[1]!).exp).toBeLessThan(Date.now() / 1000 - 3000);
      expectError(await t.request({ url: '/v1/posts', token: issued.accessToken }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });

    it('rejects an expired opaque token', async () => {
      const member = await t.createUser('member');
      const client = (await findClientByClientId(t.database.db.kysely, ADMIN_CLIENT_ID))!;
      const issued = await pastTokenService(2 * 3600 * 1000).issueAccessToken({
        client: { ...client, accessTokenFormat: 'opaque' },
        subject: member.id,
        subjectType: 'user',
        scopes: ['read:posts'],
        grantType: 'authorization_code',
      });
      expectError(await t.request({ url: '/v1/posts', token: issued.accessToken }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });

    it.each(['jwt', 'opaque'] as const)('rejects a revoked %s token', async (format) => {
      const member = await t.createUser('member');
      const token = await member.token(['read:posts'], { format });
      await t.database.db.kysely.updateTable('accessTokens').set({ revokedAt: new Date().toISOString() }).where('subject', '=', member.id).execute();
      expectError(await t.request({ url: '/v1/posts', token }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });

    it('rejects a token for a user that does not exist', async () => {
      const client = (await findClientByClientId(t.database.db.kysely, ADMIN_CLIENT_ID))!;
      const issued = await t.app.tokens.issueAccessToken({ client, subject: 'no-such-user', subjectType: 'user', scopes: ['read:posts'], grantType: 'authorization_code' });
      expectError(await t.request({ url: '/v1/posts', token: issued.accessToken }), 401, INVALID_TOKEN, INACTIVE_SUBJECT_CHALLENGE);
    });

    it('rejects a non-Bearer scheme (Basic) with 401 and a Bearer challenge without an error code (RFC 6750 §3.1)', async () => {
      const before = await postCount();
      const basic = `Basic ${Buffer.from('admin@example.com:admin-password-for-tests').toString('base64')}`;
      const res = await t.request({ method: 'POST', url: '/v1/posts', headers: { authorization: basic }, body: { title: 't', body: 'b', status: 'published' } });
      expectError(res, 401, { error: { code: 'UNAUTHENTICATED', message: 'Use an Authorization header of the form "Bearer <token>".' } }, REALM);
      expect(await postCount()).toBe(before);
    });

    it.each(['Bearer abc def', 'Bearer', 'Bearer <token>'])('rejects a malformed Bearer credential (%s) as an invalid_request', async (authorization) => {
      const res = await t.request({ url: '/v1/rest', headers: { authorization } });
      expectError(res, 401, { error: { code: 'UNAUTHENTICATED', message: 'Use an Authorization header of the form "Bearer <token>".' } }, INVALID_REQUEST_CHALLENGE);
    });

    it('refuses a valid, recently used token wrapped in a malformed credential', async () => {
      const token = await (await t.createUser('member')).token(['read:posts']);
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200); // now cached
      for (const authorization of [`Bearer ${token} x`, `Bearer ${token},${token}`, `Bearer "${token}"`]) {
        const res = await t.request({ url: '/v1/posts', headers: { authorization } });
        expectError(res, 401, { error: { code: 'UNAUTHENTICATED', message: 'Use an Authorization header of the form "Bearer <token>".' } }, INVALID_REQUEST_CHALLENGE);
      }
      // Spaces around the token are allowed by RFC 6750's grammar.
      expect((await t.request({ url: '/v1/posts', headers: { authorization: `Bearer  ${token} ` } })).statusCode).toBe(200);
    });

    it('accepts the scheme name case-insensitively', async () => {
      const token = await (await t.createUser('member')).token(['read:posts']);
      const res = await t.request({ url: '/v1/posts', headers: { authorization: `bearer ${token}` } });
      expect(res.statusCode, res.body).toBe(200);
    });
  });

  describe('tokens anywhere but the Authorization header are refused', () => {
    const QUERY_TOKEN_REFUSED = {
      error: {
        code: 'VALIDATION_FAILED',
        message: 'Send the access token in the Authorization header, not in the URL.',
        details: [{ path: '/query/access_token', message: 'tokens are accepted only in the Authorization header' }],
      },
    };
    const BODY_TOKEN_REFUSED = {
      error: {
        code: 'VALIDATION_FAILED',
        message: 'Send the access token in the Authorization header, not in the body.',
        details: [{ path: '/body/access_token', message: 'tokens are accepted only in the Authorization header' }],
      },
    };

    it('refuses ?access_token= even when a valid Authorization header is also sent', async () => {
      const token = await (await t.createUser('member')).token();
      const res = await t.request({ url: `/v1/posts?access_token=${token}`, token });
      expectError(res, 400, QUERY_TOKEN_REFUSED, INVALID_REQUEST_CHALLENGE);
    });

    it('never authenticates with ?access_token= alone', async () => {
      const token = await (await t.createUser('admin')).token();
      const res = await t.request({ url: `/v1/clients?access_token=${token}` });
      expectError(res, 400, QUERY_TOKEN_REFUSED, INVALID_REQUEST_CHALLENGE);
    });

    it('refuses ?access_token= on a public operation too', async () => {
      const token = await (await t.createUser('member')).token();
      expectError(await t.request({ url: `/v1/rest?access_token=${token}` }), 400, QUERY_TOKEN_REFUSED, INVALID_REQUEST_CHALLENGE);
    });

    it('refuses an access_token body property even with a valid Authorization header, and creates nothing', async () => {
      const token = await (await t.createUser('member')).token();
      const before = await postCount();
      const res = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 't', body: 'b', status: 'published', access_token: token } });
      expectError(res, 400, BODY_TOKEN_REFUSED, INVALID_REQUEST_CHALLENGE);
      expect(await postCount()).toBe(before);
    });

    it('never authenticates with an access_token body property alone', async () => {
      const token = await (await t.createUser('member')).token();
      const before = await postCount();
      const res = await t.request({ method: 'POST', url: '/v1/posts', body: { title: 't', body: 'b', status: 'published', access_token: token } });
      expectError(res, 401, UNAUTHENTICATED, REALM);
      expect(await postCount()).toBe(before);
    });
  });

  describe('public operation GET /v1/rest', () => {
    const expectedSpec = () => ({ ...PUBLISHED_SPEC, servers: [{ url: 'http://127.0.0.1:3000', description: 'This server' }] });

    it('serves the published contract anonymously, publicly cacheable', async () => {
      const res = await t.request({ url: '/v1/rest' });
      expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: expectedSpec() });
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.headers['cache-control']).toBe('public, no-cache');
      expect(res.headers['www-authenticate']).toBeUndefined();
    });

    it('serves it with a valid token as a private response', async () => {
      const token = await (await t.createUser('member')).token([]);
      expectPrivateJson(await t.request({ url: '/v1/rest', token }), expectedSpec());
    });

    it('still answers 401 invalid_token when the token sent is invalid', async () => {
      expectError(await t.request({ url: '/v1/rest', token: 'garbage' }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });
  });

  describe('token formats', () => {
    it.each(['jwt', 'opaque'] as const)('accepts a %s access token', async (format) => {
      const member = await t.createUser('member');
      const token = await member.token(['read:posts', 'write:posts'], { format });
      expect(token.includes('.')).toBe(format === 'jwt');
      const post = await createPost(t, token, { title: `by ${format}`, status: 'draft' });
      expect(post.authorId).toBe(member.id);
      expectPrivateJson(await t.request({ url: `/v1/posts/${post.id}`, token }), post);
    });
  });

  describe('subject changes end sessions at once (the token cache must not keep them alive)', () => {
    it.each(['jwt', 'opaque'] as const)('a deactivated user’s %s token is 401 on the very next request', async (format) => {
      const member = await t.createUser('member');
      const token = await member.token(undefined, { format });
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200); // now cached
      const current = await readUser(t, member.id);
      const admin = await t.adminClientToken();
      const put = await t.request({
        method: 'PUT',
        url: `/v1/users/${member.id}`,
        token: admin,
        body: { email: current.email, name: current.name, role: current.role, active: false },
      });
      expect(put.statusCode, put.body).toBe(200);
      expect(put.json()).toEqual({ ...current, active: false, updatedAt: put.json().updatedAt });
      // The deactivation revoked the token (and evicted it from the cache).
      expectError(await t.request({ url: '/v1/posts', token }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
      expectError(await t.request({ url: '/v1/oauth', token }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
      // A token issued after the deactivation does not work either.
      expectError(await t.request({ url: '/v1/posts', token: await member.token() }), 401, INVALID_TOKEN, INACTIVE_SUBJECT_CHALLENGE);
    });

    it('reactivating a user does not bring back the tokens they held when deactivated', async () => {
      const member = await t.createUser('member');
      const stolen = await member.token();
      expect((await t.request({ url: '/v1/posts', token: stolen })).statusCode).toBe(200);
      const current = await readUser(t, member.id);
      const admin = await t.adminClientToken();
      const body = { email: current.email, name: current.name, role: current.role };
      expect((await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: admin, body: { ...body, active: false } })).statusCode).toBe(200);
      expectError(await t.request({ url: '/v1/posts', token: stolen }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
      expect((await t.request({ method: 'PUT', url: `/v1/users/${member.id}`, token: admin, body: { ...body, active: true } })).statusCode).toBe(200);
      expectError(await t.request({ url: '/v1/posts', token: stolen }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
      // A token issued after the reactivation works.
      expect((await t.request({ url: '/v1/posts', token: await member.token() })).statusCode).toBe(200);
    });

    it('a deleted user’s token is 401 on the very next request', async () => {
      const member = await t.createUser('member');
      const token = await member.token();
      expect((await t.request({ url: '/v1/authorization', token })).statusCode).toBe(200);
      const del = await t.request({ method: 'DELETE', url: `/v1/users/${member.id}`, token: await t.adminClientToken() });
      expect({ status: del.statusCode, body: del.body }).toEqual({ status: 204, body: '' });
      expectError(await t.request({ url: '/v1/authorization', token }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });

    it('a role change takes effect on the next request (demoted editor no longer sees drafts)', async () => {
      const author = await t.createUser('member');
      const draft = await createPost(t, await author.token(), { title: 'secret draft', status: 'draft' });
      const editor = await t.createUser('editor');
      const token = await editor.token();
      expect((await t.request({ url: `/v1/posts/${draft.id}`, token })).statusCode).toBe(200);
      const current = await readUser(t, editor.id);
      const put = await t.request({
        method: 'PUT',
        url: `/v1/users/${editor.id}`,
        token: await t.adminClientToken(),
        body: { email: current.email, name: current.name, role: 'member', active: true },
      });
      expect(put.statusCode, put.body).toBe(200);
      expectError(await t.request({ url: `/v1/posts/${draft.id}`, token }), 404, { error: { code: 'NOT_FOUND', message: 'The resource does not exist.' } });
    });

    it('a deactivation racing with a first lookup of the user is not undone by that lookup', async () => {
      // Hands query results over only when released, so a read can be made to finish after a later write
      // (the read itself has run and released its connection by then).
      let release: () => void = () => {};
      let gate: Promise<void> = Promise.resolve();
      let readDone: () => void = () => {};
      const read = new Promise<void>((resolve) => (readDone = resolve));
      const delayed = <T extends object>(target: T): T =>
        new Proxy(target, {
          get(obj, prop) {
            const value = Reflect.get(obj, prop, obj) as unknown;
            if (typeof value !== 'function') return value;
            if (prop === 'executeTakeFirst') {
              return async (...args: unknown[]) => {
                const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(obj, args);
                readDone();
                await gate;
                return result;
              };
            }
            return (...args: unknown[]) => {
              const result = (value as (...a: unknown[]) => unknown).apply(obj, args);
              return result !== null && typeof result === 'object' && !(result instanceof Promise) ? delayed(result) : result;
            };
          },
        });
      const kysely = t.database.db.kysely;
      const directory = new SubjectDirectory(delayed(kysely));
      const member = await t.createUser('member');

      gate = new Promise((resolve) => (release = resolve));
      const inFlight = directory.lookup('user', member.id); // reads the row while the user is still active
      await read;
      await kysely.updateTable('users').set({ active: false }).where('id', '=', member.id).execute();
      directory.forget(member.id); // what the deactivation does
      release();
      expect(await inFlight).toEqual({ id: member.id, role: 'member', active: true, scopes: null, revocations: null, rateLimit: null }); // that request began before the change
      expect(await directory.lookup('user', member.id)).toEqual({ id: member.id, role: 'member', active: false, scopes: null, revocations: null, rateLimit: null });
    });

    it('a deleted client’s client-credentials tokens stop working, and it can get no new ones', async () => {
      const admin = await t.adminClientToken();
      const created = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token: admin,
        body: { name: 'Doomed service', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member' },
      });
      expect(created.statusCode, created.body).toBe(201);
      const client = created.json() as { id: string; clientId: string; clientSecret: string };
      const basic = `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}`;
      const tokenRequest = () =>
        t.app.fastify.inject({
          method: 'POST',
          url: '/oauth/token',
          headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic },
          payload: 'grant_type=client_credentials',
        });
      const issued = await tokenRequest();
      expect(issued.statusCode, issued.body).toBe(200);
      const token = (JSON.parse(issued.body) as { access_token: string }).access_token;
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200); // now cached

      const del = await t.request({ method: 'DELETE', url: `/v1/clients/${client.id}`, token: admin });
      expect({ status: del.statusCode, body: del.body }).toEqual({ status: 204, body: '' });
      // The token is self-contained (nothing to mark): its subject, the client, is gone.
      expectError(await t.request({ url: '/v1/posts', token }), 401, INVALID_TOKEN, INACTIVE_SUBJECT_CHALLENGE);
      const again = await tokenRequest();
      expect({ status: again.statusCode, body: JSON.parse(again.body) }).toEqual({
        status: 401,
        body: { error: 'invalid_client', error_description: 'Client authentication failed.' },
      });
    });

    it("a client-credentials JWT stops working when its client's tokens are revoked, on every instance, and a new one works", async () => {
      const admin = await t.adminClientToken();
      const created = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token: admin,
        body: { name: 'Leaky service', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member' },
      });
      expect(created.statusCode, created.body).toBe(201);
      const client = created.json() as { id: string; clientId: string; clientSecret: string };
      const tokenRequest = () =>
        t.app.fastify.inject({
          method: 'POST',
          url: '/oauth/token',
          headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${client.clientId}:${client.clientSecret}`).toString('base64')}` },
          payload: 'grant_type=client_credentials',
        });
      const token = (JSON.parse((await tokenRequest()).body) as { access_token: string }).access_token;
      expect(decodePart(token.split('.')[1]!)).toMatchObject({ reg: client.id, rev: 0 });
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200); // now cached

      // What `clients rotate-secret --revoke-tokens` commits (the secret aside), as another process would.
      await t.app.db.kysely.transaction().execute((trx) => revokeClientTokens(trx, client.clientId, new Date().toISOString()));
      // A server that never saw the token refuses it at once: the count it carries is behind.
      const fresh = new SubjectDirectory(t.app.db.kysely);
      expect((await fresh.lookup('client', client.clientId))?.revocations).toBe(1);
      let status = 200;
      for (let waited = 0; status === 200 && waited < 3000; waited += 50) {
        status = (await t.request({ url: '/v1/posts', token })).statusCode;
        if (status === 200) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expectError(await t.request({ url: '/v1/posts', token }), 401, INVALID_TOKEN, `${REALM}, error="invalid_token", error_description="The access token was revoked"`);
      const renewed = await tokenRequest();
      expect(renewed.statusCode, renewed.body).toBe(200);
      const next = (JSON.parse(renewed.body) as { access_token: string }).access_token;
      expect(decodePart(next.split('.')[1]!)).toMatchObject({ reg: client.id, rev: 1 });
      expect((await t.request({ url: '/v1/posts', token: next })).statusCode).toBe(200);
    });

    it('user tokens issued to a deleted client stop working too', async () => {
      const admin = await t.adminClientToken();
      const created = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token: admin,
        body: {
          name: 'Doomed web app',
          type: 'public',
          redirectUris: ['https://app.example.com/callback'],
          grantTypes: ['authorization_code'],
          scopes: ['read:posts'],
        },
      });
      expect(created.statusCode, created.body).toBe(201);
      const record = (await findClientByClientId(t.database.db.kysely, created.json().clientId))!;
      const member = await t.createUser('member');
      const { accessToken } = await t.app.tokens.issueAccessToken({ client: record, subject: member.id, subjectType: 'user', scopes: ['read:posts'], grantType: 'authorization_code' });
      expect((await t.request({ url: '/v1/posts', token: accessToken })).statusCode).toBe(200); // now cached

      const del = await t.request({ method: 'DELETE', url: `/v1/clients/${record.id}`, token: admin });
      expect(del.statusCode).toBe(204);
      // The deletion revoked it and evicted it from the cache: it is read again, and refused.
      expectError(await t.request({ url: '/v1/posts', token: accessToken }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });
  });
});
