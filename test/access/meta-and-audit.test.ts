import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { tokenLookupKey } from '../../src/oauth/secrets.js';
import { newId } from '../../src/storage/ids.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { ADMIN_CLIENT_ID, type TestApp, type TestUser } from '../helpers/app.js';
import {
  INVALID_TOKEN,
  INVALID_TOKEN_CHALLENGE,
  REALM,
  UNAUTHENTICATED,
  createPost,
  expectError,
  expectPrivateJson,
  startAccessApp,
  type PostView,
} from './support.js';

/** policy.yaml, roles.member.permissions, in order. */
const MEMBER_PERMISSIONS = [
  'read_user', 'update_user', 'read_post', 'create_post', 'update_post', 'delete_post', 'read_comment',
  'create_comment', 'update_comment', 'delete_comment', 'read_schema',
];
/** policy.yaml, roles.editor.permissions, in order. */
const EDITOR_PERMISSIONS = [
  'read_user', 'read_post', 'create_post', 'update_post', 'delete_post', 'read_comment', 'create_comment',
  'update_comment', 'delete_comment', 'read_schema',
];
/** policy.yaml, roles.admin.permissions, in order. */
const ADMIN_PERMISSIONS = [
  'read_user', 'create_user', 'update_user', 'delete_user', 'read_post', 'create_post', 'update_post', 'delete_post',
  'read_comment', 'create_comment', 'update_comment', 'delete_comment', 'read_client', 'create_client',
  'update_client', 'delete_client', 'read_schema', 'read_audit',
];

function iso(epochSeconds: number): string {
  return new Date(epochSeconds * 1000).toISOString();
}

describe.each(DATABASE_KINDS)('meta endpoints and the audit log on %s', (kind) => {
  let t: TestApp;
  let member: TestUser;
  let editor: TestUser;

  beforeAll(async () => {
    t = await startAccessApp(kind);
    member = await t.createUser('member');
    editor = await t.createUser('editor');
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('GET /v1/authorization', () => {
    it('describes a member whose token carries only read:posts: effective permissions are read_post alone', async () => {
      const res = await t.request({ url: '/v1/authorization', token: await member.token(['read:posts']) });
      expectPrivateJson(res, {
        principal: { type: 'user', id: member.id, clientId: ADMIN_CLIENT_ID, role: 'member' },
        roles: ['member'],
        permissions: MEMBER_PERMISSIONS,
        scopes: ['read:posts'],
        effectivePermissions: ['read_post'],
      });
    });

    it('intersects an editor’s permissions with the token’s post scopes', async () => {
      const res = await t.request({ url: '/v1/authorization', token: await editor.token(['write:posts', 'read:posts']) });
      expectPrivateJson(res, {
        principal: { type: 'user', id: editor.id, clientId: ADMIN_CLIENT_ID, role: 'editor' },
        roles: ['editor'],
        permissions: EDITOR_PERMISSIONS,
        scopes: ['read:posts', 'write:posts'],
        effectivePermissions: ['read_post', 'create_post', 'update_post', 'delete_post'],
      });
    });

    it('answers a token without any scope (the operation needs none) with no effective permission', async () => {
      const res = await t.request({ url: '/v1/authorization', token: await member.token([]) });
      expectPrivateJson(res, {
        principal: { type: 'user', id: member.id, clientId: ADMIN_CLIENT_ID, role: 'member' },
        roles: ['member'],
        permissions: MEMBER_PERMISSIONS,
        scopes: [],
        effectivePermissions: [],
      });
    });

    it('identifies a client principal by the client’s resource id, as the contract says', async () => {
      const client = await t.database.db.kysely.selectFrom('clients').select('id').where('clientId', '=', ADMIN_CLIENT_ID).executeTakeFirstOrThrow();
      const res = await t.request({ url: '/v1/authorization', token: await t.adminClientToken('read:clients write:clients') });
      expectPrivateJson(res, {
        principal: { type: 'client', id: client.id, clientId: ADMIN_CLIENT_ID, role: 'admin' },
        roles: ['admin'],
        permissions: ADMIN_PERMISSIONS,
        scopes: ['read:clients', 'write:clients'],
        effectivePermissions: ['read_client', 'create_client', 'update_client', 'delete_client'],
      });
    });

    it('refuses an anonymous caller with 401 and a bare challenge', async () => {
      expectError(await t.request({ url: '/v1/authorization' }), 401, UNAUTHENTICATED, REALM);
    });

    it('refuses an invalid token with 401 invalid_token', async () => {
      expectError(await t.request({ url: '/v1/authorization', token: 'x.y.z' }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    });
  });

  describe('GET /v1/oauth', () => {
    it('describes a JWT as the server sees it (claims and record agree)', async () => {
      const token = await member.token(['write:posts', 'read:posts']);
      const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { iat: number; exp: number; jti: string };
      const res = await t.request({ url: '/v1/oauth', token });
      expectPrivateJson(res, {
        active: true,
        tokenType: 'Bearer',
        format: 'jwt',
        clientId: ADMIN_CLIENT_ID,
        subject: member.id,
        scopes: ['read:posts', 'write:posts'],
        grantType: 'authorization_code',
        issuedAt: iso(claims.iat),
        expiresAt: iso(claims.exp),
        jti: claims.jti,
      });
      expect(claims.exp - claims.iat).toBe(600);
      expect(Math.abs(claims.iat * 1000 - Date.now())).toBeLessThan(60_000);
    });

    it('describes an opaque token from its stored record', async () => {
      const token = await member.token(['read:posts'], { format: 'opaque' });
      const row = await t.database.db.kysely.selectFrom('accessTokens').selectAll().where('tokenHash', '=', tokenLookupKey(token)).executeTakeFirstOrThrow();
      const res = await t.request({ url: '/v1/oauth', token });
      expectPrivateJson(res, {
        active: true,
        tokenType: 'Bearer',
        format: 'opaque',
        clientId: ADMIN_CLIENT_ID,
        subject: member.id,
        scopes: ['read:posts'],
        grantType: 'authorization_code',
        issuedAt: new Date(row.issuedAt).toISOString(),
        expiresAt: new Date(row.expiresAt).toISOString(),
        jti: row.jti,
      });
      expect(Date.parse(row.expiresAt) - Date.parse(row.issuedAt)).toBe(600_000);
    });

    it('describes a client-credentials token', async () => {
      const token = await t.adminClientToken('read:posts');
      const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { iat: number; exp: number; jti: string };
      expectPrivateJson(await t.request({ url: '/v1/oauth', token }), {
        active: true,
        tokenType: 'Bearer',
        format: 'jwt',
        clientId: ADMIN_CLIENT_ID,
        subject: ADMIN_CLIENT_ID,
        scopes: ['read:posts'],
        grantType: 'client_credentials',
        issuedAt: iso(claims.iat),
        expiresAt: iso(claims.exp),
        jti: claims.jti,
      });
    });

    it('refuses an anonymous caller with 401 and a bare challenge', async () => {
      expectError(await t.request({ url: '/v1/oauth' }), 401, UNAUTHENTICATED, REALM);
    });
  });

  describe('audit log (seed authorization rule 8)', () => {
    type Res = Awaited<ReturnType<TestApp['request']>>;

    /** The audit events of one request, once the log has written them. */
    async function eventsOf(res: Res) {
      const requestId = String(res.headers['x-request-id']);
      return vi.waitFor(
        async () => {
          await t.app.audit.flush();
          const rows = await t.database.db.kysely
            .selectFrom('auditEvents')
            .select(['requestId', 'subject', 'clientId', 'interface', 'operation', 'resourceType', 'resourceId', 'decision', 'reason', 'time'])
            .where('requestId', '=', requestId)
            .execute();
          if (rows.length === 0) throw new Error(`no audit event for ${requestId}`);
          return rows;
        },
        { timeout: 2000, interval: 20 },
      );
    }

    function event(res: Res, fields: Record<string, unknown>) {
      return [{ requestId: res.headers['x-request-id'], interface: 'rest', time: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/), ...fields }];
    }

    let alice: TestUser;
    let bob: TestUser;
    let draft: PostView;
    beforeAll(async () => {
      alice = await t.createUser('member');
      bob = await t.createUser('member');
      draft = await createPost(t, await alice.token(), { title: 'audited draft', status: 'draft' });
    });

    it('records a scope denial', async () => {
      const res = await t.request({ method: 'POST', url: '/v1/posts', token: await bob.token(['read:posts']), body: { title: 'x', body: 'y', status: 'draft' } });
      expect(res.statusCode).toBe(403);
      expect(await eventsOf(res)).toEqual(
        event(res, { subject: bob.id, clientId: ADMIN_CLIENT_ID, operation: 'createPost', resourceType: null, resourceId: null, decision: 'deny', reason: 'scope' }),
      );
    });

    it('records a per-resource denial with the resource type and id', async () => {
      const res = await t.request({ url: `/v1/posts/${draft.id}`, token: await bob.token() });
      expect(res.statusCode).toBe(404);
      expect(await eventsOf(res)).toEqual(
        event(res, { subject: bob.id, clientId: ADMIN_CLIENT_ID, operation: 'getPost', resourceType: 'post', resourceId: draft.id, decision: 'deny', reason: 'resource' }),
      );
    });

    it('records a per-resource denial for a missing resource the same way', async () => {
      const missing = newId();
      const res = await t.request({ method: 'DELETE', url: `/v1/posts/${missing}`, token: await bob.token() });
      expect(res.statusCode).toBe(404);
      expect(await eventsOf(res)).toEqual(
        event(res, { subject: bob.id, clientId: ADMIN_CLIENT_ID, operation: 'deletePost', resourceType: 'post', resourceId: missing, decision: 'deny', reason: 'resource' }),
      );
    });

    it('records a role denial', async () => {
      const res = await t.request({ url: '/v1/clients', token: await bob.token() });
      expect(res.statusCode).toBe(403);
      expect(await eventsOf(res)).toEqual(
        event(res, { subject: bob.id, clientId: ADMIN_CLIENT_ID, operation: 'listClients', resourceType: null, resourceId: null, decision: 'deny', reason: 'role' }),
      );
    });

    /**
     * Refused credentials of callers nobody authenticated are counted per address and written as one event
     * when the window (1 s here) closes: each test below calls from an address of its own.
     */
    async function aggregatedFrom(address: string) {
      return vi.waitFor(
        async () => {
          await t.app.audit.flush();
          const rows = await t.database.db.kysely
            .selectFrom('auditEvents')
            .select(['requestId', 'subject', 'clientId', 'interface', 'operation', 'resourceType', 'resourceId', 'decision', 'reason', 'count', 'sourceAddress'])
            .where('sourceAddress', '=', address)
            .execute();
          if (rows.length === 0) throw new Error(`no aggregated event for ${address}`);
          return rows;
        },
        { timeout: 5000, interval: 50 },
      );
    }

    const refusedFrom = (address: string, operation: string, count: number) => [
      { requestId: null, subject: null, clientId: null, interface: 'rest', operation, resourceType: null, resourceId: null, decision: 'deny', reason: 'authentication', count, sourceAddress: address },
    ];

    it('records anonymous callers on a protected operation as authentication denials, counted per address', async () => {
      for (let i = 0; i < 3; i++) {
        const res = await t.app.fastify.inject({ url: `/v1/posts/${draft.id}`, remoteAddress: '192.0.2.11' });
        expect(res.statusCode).toBe(401);
      }
      expect(await aggregatedFrom('192.0.2.11')).toEqual(refusedFrom('192.0.2.11', 'getPost', 3));
    });

    it('records invalid tokens as authentication denials, counted per address', async () => {
      const res = await t.app.fastify.inject({ url: '/v1/posts', remoteAddress: '192.0.2.12', headers: { authorization: 'Bearer forged' } });
      expect(res.statusCode).toBe(401);
      expect(await aggregatedFrom('192.0.2.12')).toEqual(refusedFrom('192.0.2.12', 'listPosts', 1));
    });

    it('records a token sent in the query string as an authentication denial, counted against the IP’s rate limit', async () => {
      const token = await bob.token();
      const res = await t.app.fastify.inject({ url: `/v1/posts?access_token=${token}`, remoteAddress: '192.0.2.13', headers: { authorization: `Bearer ${token}` } });
      expect(res.statusCode).toBe(400);
      expect(res.headers['ratelimit-policy']).toBe('"anonymous";q=1000000;w=60');
      expect(await aggregatedFrom('192.0.2.13')).toEqual(refusedFrom('192.0.2.13', 'listPosts', 1));
    });

    it('records a token sent in the body as an authentication denial of the caller', async () => {
      const token = await bob.token();
      const res = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 't', body: 'b', status: 'draft', access_token: token } });
      expect(res.statusCode).toBe(400);
      expect(await eventsOf(res)).toEqual(
        event(res, { subject: bob.id, clientId: ADMIN_CLIENT_ID, operation: 'createPost', resourceType: null, resourceId: null, decision: 'deny', reason: 'authentication' }),
      );
    });

    it('records an allowed per-resource read with the resource and the caller', async () => {
      const res = await t.request({ url: `/v1/posts/${draft.id}`, token: await alice.token() });
      expect(res.statusCode).toBe(200);
      expect(await eventsOf(res)).toEqual(
        event(res, { subject: alice.id, clientId: ADMIN_CLIENT_ID, operation: 'getPost', resourceType: 'post', resourceId: draft.id, decision: 'allow', reason: 'resource' }),
      );
    });

    it('records an allowed operation without a resource as granted', async () => {
      const res = await t.request({ url: '/v1/posts', token: await alice.token() });
      expect(res.statusCode).toBe(200);
      expect(await eventsOf(res)).toEqual(
        event(res, { subject: alice.id, clientId: ADMIN_CLIENT_ID, operation: 'listPosts', resourceType: null, resourceId: null, decision: 'allow', reason: 'granted' }),
      );
    });

    it('records a client principal by its client_id', async () => {
      const res = await t.request({ url: `/v1/posts/${draft.id}`, token: await t.adminClientToken() });
      expect(res.statusCode).toBe(200);
      expect(await eventsOf(res)).toEqual(
        event(res, { subject: ADMIN_CLIENT_ID, clientId: ADMIN_CLIENT_ID, operation: 'getPost', resourceType: 'post', resourceId: draft.id, decision: 'allow', reason: 'resource' }),
      );
    });

    it('records public access', async () => {
      const res = await t.request({ url: '/v1/rest' });
      expect(res.statusCode).toBe(200);
      expect(await eventsOf(res)).toEqual(
        event(res, { subject: null, clientId: null, operation: 'getRestContract', resourceType: null, resourceId: null, decision: 'allow', reason: 'public' }),
      );
    });
  });
});
