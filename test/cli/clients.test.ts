import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { authenticateClient } from '../../src/oauth/client-auth.js';
import { digestSecret } from '../../src/oauth/secrets.js';
import { nowIso } from '../../src/storage/ids.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, runCli, type CliDatabase } from './cli-process.js';

const SERVICE = ['clients', 'create', '--name', 'Reporting', '--type', 'confidential', '--grant', 'client_credentials', '--scope', 'read:users', '--scope', 'read:posts', '--role', 'editor'];

describe.each(DATABASE_KINDS)('portcullis clients on %s', { timeout: CLI_TEST_TIMEOUT }, (kind) => {
  let t: CliDatabase;
  beforeEach(async () => {
    t = await openCliDatabase(kind);
  });
  afterEach(async () => {
    await t.close();
  });

  const clientRow = (clientId: string) => t.db.kysely.selectFrom('clients').selectAll().where('clientId', '=', clientId).executeTakeFirst();
  /** The token endpoint's own check (client_secret_post). */
  const authenticate = (clientId: string, secret: string) =>
    authenticateClient(t.db.kysely, { authorization: undefined, params: { client_id: clientId, client_secret: secret } });

  it('create prints client_id and the secret once; the secret authenticates; rotate-secret replaces it', async () => {
    const created = await runCli([...SERVICE, '--client-id', 'reporting', '--format', 'opaque', '--ttl', '900'], t.env);
    expect(created.code).toBe(0);
    const secret = /^client_secret: (\S+)$/m.exec(created.stdout)?.[1];
    expect(created.stdout).toBe(`created confidential client reporting (Reporting)\nclient_id: reporting\nclient_secret: ${secret}\n(shown once: only its digest is stored)\n`);
    const row = (await clientRow('reporting'))!;
    expect(row).toMatchObject({ name: 'Reporting', type: 'confidential', role: 'editor', accessTokenFormat: 'opaque', accessTokenTtl: 900 });
    expect(JSON.parse(row.grantTypes)).toEqual(['client_credentials']);
    expect(JSON.parse(row.scopes)).toEqual(['read:users', 'read:posts']);
    expect(row.secretHash).toBe(digestSecret(secret!));
    expect((await authenticate('reporting', secret!)).client.clientId).toBe('reporting');

    const rotated = await runCli(['clients', 'rotate-secret', 'reporting'], t.env);
    expect(rotated.code).toBe(0);
    const fresh = /^client_secret: (\S+)$/m.exec(rotated.stdout)?.[1];
    expect(fresh).toBeDefined();
    expect(fresh).not.toBe(secret);
    const after = (await clientRow('reporting'))!;
    expect(after.secretHash).toBe(digestSecret(fresh!));
    expect(after.secretHash).not.toBe(digestSecret(secret!));
    await expect(authenticate('reporting', secret!)).rejects.toMatchObject({ error: 'invalid_client' });
    expect((await authenticate('reporting', fresh!)).client.clientId).toBe('reporting');
  });

  it('create --json has the shape of the REST 201 body; a public client gets no secret; list never shows secrets', async () => {
    const created = await runCli([...SERVICE, '--json'], t.env);
    expect(created.code).toBe(0);
    const body = JSON.parse(created.stdout);
    expect(body.clientId).toMatch(/^client-[0-9a-f]+$/);
    expect(body).toMatchObject({ type: 'confidential', accessTokenFormat: 'jwt', accessTokenTtl: 600, firstParty: false, legacy: false, redirectUris: [] });
    expect((await clientRow(body.clientId))!.secretHash).toBe(digestSecret(body.clientSecret));
    expect(body).not.toHaveProperty('secretHash');

    const spa = await runCli(
      ['clients', 'create', '--name', 'SPA', '--type', 'public', '--grant', 'authorization_code', '--scope', 'openid', '--role', 'member', '--redirect-uri', 'https://app.example.com/cb', '--client-id', 'spa'],
      t.env,
    );
    expect(spa).toEqual({ code: 0, stdout: 'created public client spa (SPA)\nclient_id: spa\n', stderr: '' });
    expect((await clientRow('spa'))!.secretHash).toBeNull();
    expect(await runCli(['clients', 'rotate-secret', 'spa'], t.env)).toEqual({ code: 1, stdout: '', stderr: 'error: client spa is public: it has no secret to rotate\n' });

    const listed = await runCli(['clients', 'list', '--json'], t.env);
    const clients = JSON.parse(listed.stdout);
    expect(clients.map((c: { clientId: string }) => c.clientId)).toEqual([body.clientId, 'spa']);
    expect(listed.stdout).not.toContain(body.clientSecret);
    expect(listed.stdout).not.toContain('secretHash');
    const table = await runCli(['clients', 'list'], t.env);
    expect(table.stdout.split('\n')[0]).toMatch(/^client_id\s+name\s+type\s+role\s+grants\s+scopes\s+format\s+ttl\s+created$/);
    expect(table.stdout).toMatch(/\nspa\s+SPA\s+public\s+member\s+authorization_code\s+openid\s+jwt\s+600\s/);
  });

  it("refuses what POST /v1/clients refuses, naming the option (exit 2), and a taken client_id (exit 1)", async () => {
    const publicWithSecretGrant = await runCli(['clients', 'create', '--name', 'X', '--type', 'public', '--grant', 'client_credentials', '--scope', 'read:posts', '--role', 'member'], t.env);
    expect(publicWithSecretGrant).toEqual({
      code: 2,
      stdout: '',
      stderr: "error: --grant: a public client cannot use client_credentials\nRun 'portcullis clients create --help' for usage.\n",
    });
    const unknownScope = await runCli([...SERVICE, '--scope', 'delete:everything'], t.env);
    expect(unknownScope.code).toBe(2);
    expect(unknownScope.stderr).toMatch(/^error: --scope #3: must be one of read:users, /);
    const ttl = await runCli([...SERVICE, '--ttl', '5'], t.env);
    expect(ttl.stderr).toBe("error: --ttl: must be >= 300\nRun 'portcullis clients create --help' for usage.\n");
    const noRedirect = await runCli(['clients', 'create', '--name', 'X', '--type', 'public', '--grant', 'authorization_code', '--scope', 'openid', '--role', 'member'], t.env);
    expect(noRedirect.stderr).toContain('--redirect-uri: authorization_code needs at least one redirect URI');
    const insecure = await runCli(['clients', 'create', '--name', 'X', '--type', 'public', '--grant', 'authorization_code', '--scope', 'openid', '--role', 'member', '--redirect-uri', 'http://app.example.com/cb'], t.env);
    expect(insecure.stderr).toContain('--redirect-uri #1: must be an absolute https (or loopback http) URI without a fragment');
    const missingScope = await runCli(['clients', 'create', '--name', 'X', '--type', 'confidential', '--grant', 'client_credentials', '--role', 'member'], t.env);
    expect(missingScope).toMatchObject({ code: 2, stderr: "error: missing required option --scope\nRun 'portcullis clients create --help' for usage.\n" });
    expect(await t.db.kysely.selectFrom('clients').select('clientId').execute()).toEqual([]);

    expect((await runCli([...SERVICE, '--client-id', 'taken'], t.env)).code).toBe(0);
    expect(await runCli([...SERVICE, '--client-id', 'taken'], t.env)).toEqual({ code: 1, stdout: '', stderr: 'error: a client with client_id taken already exists\n' });
  });

  it("delete removes the client and revokes its tokens, not other clients' tokens; rotate-secret --revoke-tokens revokes", async () => {
    for (const id of ['doomed', 'other']) expect((await runCli([...SERVICE, '--client-id', id], t.env)).code).toBe(0);
    const issuedAt = nowIso();
    const expiresAt = new Date(Date.now() + 600_000).toISOString();
    const token = (jti: string, clientId: string) => ({
      jti, tokenHash: null, format: 'jwt', clientId, subject: clientId, subjectType: 'client', scopes: 'read:users', grantType: 'client_credentials', issuedAt, expiresAt, revokedAt: null,
    });
    await t.db.kysely.insertInto('accessTokens').values([token('d1', 'doomed'), token('o1', 'other')]).execute();

    expect(await runCli(['clients', 'delete', 'doomed'], t.env)).toEqual({ code: 0, stdout: 'deleted client doomed; revoked 1 access token\n', stderr: '' });
    expect(await clientRow('doomed')).toBeUndefined();
    const revokedAt = async (jti: string) => (await t.db.kysely.selectFrom('accessTokens').select('revokedAt').where('jti', '=', jti).executeTakeFirstOrThrow()).revokedAt;
    expect(await revokedAt('d1')).not.toBeNull();
    expect(await revokedAt('o1')).toBeNull();
    expect(await runCli(['clients', 'delete', 'doomed'], t.env)).toEqual({ code: 1, stdout: '', stderr: 'error: no client doomed\n' });

    const rotated = await runCli(['clients', 'rotate-secret', 'other', '--revoke-tokens', '--json'], t.env);
    expect(rotated.code).toBe(0);
    const { clientSecret, ...rest } = JSON.parse(rotated.stdout);
    expect(rest).toEqual({ clientId: 'other', revokedTokens: 1 });
    expect((await clientRow('other'))!.secretHash).toBe(digestSecret(clientSecret));
    expect(await revokedAt('o1')).not.toBeNull();
  });
});
