import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { configFrom } from '../../src/config/config.js';
import { digestSecret, generateSecret } from '../../src/oauth/secrets.js';
import { newId } from '../../src/storage/ids.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, runCli } from '../cli/cli-process.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { startServer, waitUntilLive, type Running } from '../helpers/server-process.js';

// A running server and the real CLI on one database: whatever the CLI revokes, deactivates or deletes stops
// working in the server within a second, although the server had the token verified and cached.

/** The longest a change made by another process may take to reach a running server. */
const PROPAGATION_MS = 1000;

async function cli(args: string[], env: Record<string, string>): Promise<Record<string, unknown>> {
  const result = await runCli([...args, '--json'], env);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout) as Record<string, unknown>;
}

async function clientToken(server: Running, clientId: string, secret: string, scope: string): Promise<string> {
  const res = await fetch(`${server.base}/oauth/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { access_token: string }).access_token;
}

async function statusOf(server: Running, token: string, url: string): Promise<number> {
  const res = await fetch(`${server.base}${url}`, { headers: { authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  return res.status;
}

/** Asks every 50 ms from the moment the CLI returned; fails unless the answer turns 401 within PROPAGATION_MS. */
async function expectRefusedWithin(server: Running, token: string, url: string): Promise<void> {
  const start = Date.now();
  let status = await statusOf(server, token, url);
  while (status !== 401 && Date.now() - start < PROPAGATION_MS) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    status = await statusOf(server, token, url);
  }
  expect({ status, withinMs: PROPAGATION_MS }).toEqual({ status: 401, withinMs: PROPAGATION_MS });
}

async function requestToken(server: Running, clientId: string, secret: string, scope: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${server.base}/oauth/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Asks every 50 ms from the moment the change was made; fails unless the token endpoint refuses within PROPAGATION_MS. */
async function expectTokenRefusedWithin(server: Running, clientId: string, secret: string, scope: string, refusal: { status: number; error: string }): Promise<void> {
  const start = Date.now();
  let answer = await requestToken(server, clientId, secret, scope);
  while (answer.status === 200 && Date.now() - start < PROPAGATION_MS) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    answer = await requestToken(server, clientId, secret, scope);
  }
  expect({ status: answer.status, error: answer.body.error, withinMs: PROPAGATION_MS }).toEqual({ ...refusal, withinMs: PROPAGATION_MS });
}

describe.each(DATABASE_KINDS)('changes made by the CLI reach a running server on %s', (kind) => {
  async function setUp() {
    const database = await openCliDatabase(kind);
    const server = await startServer(database.env, database.env.DATA_DIR);
    await waitUntilLive(server);
    return { database, server, env: database.env };
  }

  it(
    'rotate-secret --revoke-tokens, delete, and a re-registered client_id: the old tokens are refused',
    async () => {
      const { database, server, env } = await setUp();
      try {
        const create = ['clients', 'create', '--name', 'Reuse', '--type', 'confidential', '--grant', 'client_credentials', '--scope', 'read:posts', '--client-id', 'reuse1'];
        const first = await cli([...create, '--role', 'member'], env);
        const token = await clientToken(server, 'reuse1', String(first.clientSecret), 'read:posts');
        expect(await statusOf(server, token, '/v1/posts')).toBe(200);
        expect(await statusOf(server, token, '/v1/posts')).toBe(200);

        const rotated = await cli(['clients', 'rotate-secret', 'reuse1', '--revoke-tokens'], env);
        expect(rotated.tokensRevoked).toBe(true);
        // The token is a self-contained JWT: nothing of it is stored, the count it carries is now behind.
        expect(await database.db.kysely.selectFrom('accessTokens').select('jti').where('clientId', '=', 'reuse1').execute()).toEqual([]);
        await expectRefusedWithin(server, token, '/v1/posts');

        const second = await clientToken(server, 'reuse1', String(rotated.clientSecret), 'read:posts');
        expect(await statusOf(server, second, '/v1/posts')).toBe(200);
        await cli(['clients', 'delete', 'reuse1'], env);
        await expectRefusedWithin(server, second, '/v1/posts');

        // The same client_id registered again, with another role: the old registration's tokens stay refused.
        const again = await cli([...create, '--role', 'editor'], env);
        expect(again.clientId).toBe('reuse1');
        expect(await statusOf(server, second, '/v1/posts')).toBe(401);
        expect(await statusOf(server, token, '/v1/posts')).toBe(401);
        const fresh = await clientToken(server, 'reuse1', String(again.clientSecret), 'read:posts');
        expect(await statusOf(server, fresh, '/v1/posts')).toBe(200);
      } finally {
        await database.close();
      }
    },
    CLI_TEST_TIMEOUT,
  );

  it(
    'the token endpoint stops using a registration it holds once the CLI or another instance changes or deletes it',
    async () => {
      const { database, server, env } = await setUp();
      let other: App | undefined;
      try {
        const create = ['clients', 'create', '--name', 'Svc', '--type', 'confidential', '--grant', 'client_credentials', '--role', 'member', '--client-id', 'svc1'];
        const created = await cli([...create, '--scope', 'read:posts', '--scope', 'read:comments'], env);
        const firstSecret = String(created.clientSecret);
        // Issued twice: the registration is now held in the server's memory.
        for (let i = 0; i < 2; i++) expect((await requestToken(server, 'svc1', firstSecret, 'read:posts')).status).toBe(200);

        // A new secret from the CLI: the old one is refused, although the server had the old digest in memory.
        const rotated = await cli(['clients', 'rotate-secret', 'svc1'], env);
        expect(rotated.tokensRevoked).toBe(false);
        const secret = String(rotated.clientSecret);
        await expectTokenRefusedWithin(server, 'svc1', firstSecret, 'read:posts', { status: 401, error: 'invalid_client' });
        expect((await requestToken(server, 'svc1', secret, 'read:posts')).status).toBe(200);

        // Another instance on the same database narrows the client's scopes through the REST API.
        const config = configFrom({ ...env, DATA_DIR: server.dataDir });
        other = await buildApp(config, { db: database.db });
        const bootstrap = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'bootstrap.json'), 'utf8')) as { clients: { admin: { client_id: string; client_secret: string } } };
        const { client_id: adminId, client_secret: adminSecret } = bootstrap.clients.admin;
        const adminToken = await other.fastify.inject({
          method: 'POST',
          url: '/oauth/token',
          headers: { authorization: `Basic ${Buffer.from(`${adminId}:${adminSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
          payload: new URLSearchParams({ grant_type: 'client_credentials', scope: 'write:clients' }).toString(),
        });
        expect(adminToken.statusCode).toBe(200);
        const { id } = await database.db.kysely.selectFrom('clients').select('id').where('clientId', '=', 'svc1').executeTakeFirstOrThrow();
        const replaced = await other.fastify.inject({
          method: 'PUT',
          url: `/v1/clients/${id}`,
          headers: { authorization: `Bearer ${(adminToken.json() as { access_token: string }).access_token}`, 'content-type': 'application/json' },
          payload: JSON.stringify({
            name: 'Svc', type: 'confidential', grantTypes: ['client_credentials'], scopes: ['read:comments'], role: 'member',
            accessTokenFormat: 'jwt', accessTokenTtl: 600, firstParty: false, legacy: false,
          }),
        });
        expect(replaced.statusCode).toBe(200);
        await expectTokenRefusedWithin(server, 'svc1', secret, 'read:posts', { status: 400, error: 'invalid_scope' });
        expect((await requestToken(server, 'svc1', secret, 'read:comments')).status).toBe(200);

        // Deleted by the CLI: refused. Registered again under the same client_id: only the new secret works.
        await cli(['clients', 'delete', 'svc1'], env);
        await expectTokenRefusedWithin(server, 'svc1', secret, 'read:comments', { status: 401, error: 'invalid_client' });
        const again = await cli([...create, '--scope', 'read:posts'], env);
        expect(await requestToken(server, 'svc1', secret, 'read:posts')).toEqual({
          status: 401,
          body: { error: 'invalid_client', error_description: 'Client authentication failed.' },
        });
        expect((await requestToken(server, 'svc1', String(again.clientSecret), 'read:posts')).status).toBe(200);
      } finally {
        await other?.close();
        await database.close();
      }
    },
    CLI_TEST_TIMEOUT,
  );

  it(
    "users deactivate: the user's cached token is refused",
    async () => {
      const { database, server, env } = await setUp();
      try {
        const created = await cli(['users', 'create', '--email', 'dana@example.com', '--name', 'Dana', '--role', 'member', '--password', 'correct horse battery'], env);
        const userId = String((created.user as { id: string } | undefined)?.id ?? created.id);
        // No user grant exists yet: the token is written as the token endpoint would write an opaque one.
        const bootstrap = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'bootstrap.json'), 'utf8')) as { clients: { admin: { client_id: string } } };
        const admin = await database.db.kysely.selectFrom('clients').select(['id', 'clientId']).where('clientId', '=', bootstrap.clients.admin.client_id).executeTakeFirstOrThrow();
        const token = generateSecret();
        const now = Date.now();
        await database.db.kysely
          .insertInto('accessTokens')
          .values({
            jti: newId(),
            tokenHash: digestSecret(token),
            format: 'opaque',
            clientId: admin.clientId,
            clientRegistrationId: admin.id,
            subject: userId,
            subjectType: 'user',
            scopes: 'read:users',
            grantType: 'authorization_code',
            issuedAt: new Date(now).toISOString(),
            expiresAt: new Date(now + 600_000).toISOString(),
            revokedAt: null,
          })
          .execute();
        expect(await statusOf(server, token, `/v1/users/${userId}`)).toBe(200);
        expect(await statusOf(server, token, `/v1/users/${userId}`)).toBe(200);

        await cli(['users', 'deactivate', userId], env);
        await expectRefusedWithin(server, token, `/v1/users/${userId}`);
      } finally {
        await database.close();
      }
    },
    CLI_TEST_TIMEOUT,
  );
});
