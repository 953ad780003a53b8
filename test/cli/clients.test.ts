import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { findClientByClientId } from '../../src/storage/clients.js';
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
    authenticateClient((id) => findClientByClientId(t.db.kysely, id), { authorization: undefined, params: { client_id: clientId, client_secret: secret } });

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

  it('rotate-secret leaves a new version of the registration, even within the millisecond of the one before', async () => {
    expect((await runCli([...SERVICE, '--client-id', 'versioned'], t.env)).code).toBe(0);
    // A version later than the clock: a write in the same millisecond as it is what must still move it.
    const read = new Date(Date.now() + 60_000).toISOString();
    await t.db.kysely.updateTable('clients').set({ updatedAt: read }).where('clientId', '=', 'versioned').execute();
    expect((await runCli(['clients', 'rotate-secret', 'versioned'], t.env)).code).toBe(0);
    expect((await clientRow('versioned'))!.updatedAt).toBe(new Date(Date.parse(read) + 1).toISOString());
  });

  it('create gives a client without --ttl the server\'s ACCESS_TOKEN_TTL', async () => {
    const created = await runCli([...SERVICE, '--client-id', 'cli-default-ttl', '--json'], { ...t.env, ACCESS_TOKEN_TTL: '300' });
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ clientId: 'cli-default-ttl', accessTokenTtl: 300 });
    expect((await clientRow('cli-default-ttl'))!.accessTokenTtl).toBe(300);
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
      ['clients', 'create', '--name', 'SPA', '--type', 'public', '--grant', 'authorization_code', '--scope', 'openid', '--redirect-uri', 'https://app.example.com/cb', '--client-id', 'spa'],
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
    expect(table.stdout.split('\n')[0]).toMatch(/^client_id\s+name\s+type\s+role\s+grants\s+scopes\s+format\s+ttl\s+id_token_alg\s+created$/);
    expect(table.stdout).toMatch(/\nspa\s+SPA\s+public\s+-\s+authorization_code\s+openid\s+jwt\s+600\s+RS256\s/);
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
    const noRedirect = await runCli(['clients', 'create', '--name', 'X', '--type', 'public', '--grant', 'authorization_code', '--scope', 'openid'], t.env);
    expect(noRedirect.stderr).toBe("error: --redirect-uri: authorization_code needs at least one redirect URI\nRun 'portcullis clients create --help' for usage.\n");
    const missingScope = await runCli(['clients', 'create', '--name', 'X', '--type', 'confidential', '--grant', 'client_credentials', '--role', 'member'], t.env);
    expect(missingScope).toMatchObject({ code: 2, stderr: "error: missing required option --scope\nRun 'portcullis clients create --help' for usage.\n" });
    expect(await t.db.kysely.selectFrom('clients').select('clientId').execute()).toEqual([]);

    expect((await runCli([...SERVICE, '--client-id', 'taken'], t.env)).code).toBe(0);
    expect(await runCli([...SERVICE, '--client-id', 'taken'], t.env)).toEqual({ code: 1, stdout: '', stderr: 'error: a client with client_id taken already exists\n' });
  });

  it('refuses each registration rule as POST /v1/clients does, naming the option (exit 2), registering nothing', async () => {
    const create = (...args: string[]) => ['clients', 'create', '--name', 'X', ...args];
    const spa = ['--type', 'public', '--scope', 'openid', '--grant', 'authorization_code', '--redirect-uri', 'https://spa.example.com/cb'];
    const web = ['--type', 'confidential', '--scope', 'openid', '--grant', 'authorization_code', '--redirect-uri', 'https://app.example.com/cb'];
    const http = 'may use http only on the loopback addresses 127.0.0.1 and [::1] (not localhost)';
    const scheme = 'must use https, http on a loopback address, or a private-use scheme such as com.example.app';
    const cases: [string[], string][] = [
      [create(...spa, '--grant', 'implicit'), `--grant #2: must be one of authorization_code, refresh_token, client_credentials, urn:ietf:params:oauth:grant-type:device_code, password`],
      [create('--type', 'confidential', '--scope', 'openid', '--grant', 'password'), '--grant: only a legacy client may use password'],
      [create('--type', 'public', '--scope', 'openid', '--grant', 'password', '--legacy'), '--grant: a public client cannot use password'],
      [create(...spa, '--grant', 'refresh_token'), '--grant: a public client with an https redirect URI runs in a browser and cannot use refresh_token; it renews with prompt=none'],
      [
        create('--type', 'confidential', '--scope', 'read:posts', '--grant', 'client_credentials', '--grant', 'refresh_token', '--role', 'member'),
        '--grant: refresh_token needs a grant that issues one: authorization_code, urn:ietf:params:oauth:grant-type:device_code, password',
      ],
      [create('--type', 'confidential', '--scope', 'read:posts', '--grant', 'client_credentials'), '--role: is required with client_credentials'],
      [create(...web, '--role', 'member'), '--role: is used only with client_credentials'],
      [create('--type', 'confidential', '--scope', 'read:posts', '--grant', 'client_credentials', '--role', 'owner'), '--role: must be one of admin, editor, member, null'],
      [create('--type', 'confidential', '--scope', 'read:posts', '--grant', 'client_credentials', '--role', 'member', '--redirect-uri', 'https://app.example.com/cb'), '--redirect-uri: are used only with authorization_code'],
      [
        create('--type', 'public', '--scope', 'openid', '--grant', 'authorization_code', '--redirect-uri', 'http://localhost:8080/cb', '--redirect-uri', 'javascript:alert(1)', '--redirect-uri', 'https://*.example.com/cb', '--redirect-uri', 'https://app.example.com/cb#x'),
        `invalid options:\n  --redirect-uri #1: ${http}\n  --redirect-uri #2: ${scheme}\n  --redirect-uri #3: must not contain a wildcard: redirect URIs are matched exactly\n  --redirect-uri #4: must not have a fragment`,
      ],
      [create(...spa, '--redirect-uri', 'https://spa.example.com/cb'), '--redirect-uri: must NOT have duplicate items (items ## 1 and 0 are identical)'],
      [create(...spa, '--post-logout-redirect-uri', 'http://spa.example.com/'), `--post-logout-redirect-uri #1: ${http}`],
      [
        create('--type', 'public', '--scope', 'openid', '--grant', 'urn:ietf:params:oauth:grant-type:device_code', '--post-logout-redirect-uri', 'https://tv.example.com/'),
        '--post-logout-redirect-uri: are used only with authorization_code',
      ],
      [create(...spa, '--id-token-alg', 'HS256'), '--id-token-alg: must be one of RS256, ES256'],
    ];
    for (const [args, problem] of cases) {
      expect(await runCli(args, t.env)).toEqual({ code: 2, stdout: '', stderr: `error: ${problem}\nRun 'portcullis clients create --help' for usage.\n` });
    }
    expect(await t.db.kysely.selectFrom('clients').select('clientId').execute()).toEqual([]);
  });

  it('takes device_code as the short form of the device code grant\'s URN, and stores the URN', async () => {
    const created = await runCli(['clients', 'create', '--name', 'TV', '--type', 'public', '--scope', 'read:posts', '--client-id', 'tv', '--grant', 'device_code', '--grant', 'refresh_token', '--json'], t.env);
    expect(created).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(created.stdout)).toMatchObject({ clientId: 'tv', type: 'public', grantTypes: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'] });
    expect((await clientRow('tv'))?.grantTypes).toBe('["urn:ietf:params:oauth:grant-type:device_code","refresh_token"]');
    const help = await runCli(['clients', 'create', '--help'], t.env);
    expect(help.stdout).toContain('grant type: authorization_code, refresh_token, client_credentials, urn:ietf:params:oauth:grant-type:device_code (or device_code), password (repeatable)');
    // Only that one short form: other spellings are refused with the list of grant types.
    const wrong = await runCli(['clients', 'create', '--name', 'TV', '--type', 'public', '--scope', 'read:posts', '--grant', 'device'], t.env);
    expect(wrong).toEqual({
      code: 2,
      stdout: '',
      stderr: "error: --grant #1: must be one of authorization_code, refresh_token, client_credentials, urn:ietf:params:oauth:grant-type:device_code, password\nRun 'portcullis clients create --help' for usage.\n",
    });
  });

  it('registers native, device-only and user-facing clients without a role; list and show print the new fields', async () => {
    const native = await runCli(
      [
        'clients', 'create', '--name', 'Native', '--type', 'public', '--scope', 'openid', '--client-id', 'native',
        '--grant', 'authorization_code', '--grant', 'refresh_token',
        '--redirect-uri', 'http://127.0.0.1:8400/cb', '--redirect-uri', 'http://[::1]/cb', '--redirect-uri', 'com.example.app:/oauth2redirect',
        '--post-logout-redirect-uri', 'com.example.app:/signed-out', '--id-token-alg', 'ES256', '--json',
      ],
      t.env,
    );
    expect(native.code, native.stderr).toBe(0);
    expect(JSON.parse(native.stdout)).toEqual({
      id: expect.any(String),
      clientId: 'native',
      name: 'Native',
      type: 'public',
      redirectUris: ['http://127.0.0.1:8400/cb', 'http://[::1]/cb', 'com.example.app:/oauth2redirect'],
      postLogoutRedirectUris: ['com.example.app:/signed-out'],
      grantTypes: ['authorization_code', 'refresh_token'],
      scopes: ['openid'],
      role: null,
      accessTokenFormat: 'jwt',
      accessTokenTtl: 600,
      rateLimit: null,
      idTokenSignedResponseAlg: 'ES256',
      firstParty: false,
      legacy: false,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    const device = await runCli(['clients', 'create', '--name', 'TV', '--type', 'public', '--scope', 'openid', '--client-id', 'tv', '--grant', 'urn:ietf:params:oauth:grant-type:device_code', '--grant', 'refresh_token'], t.env);
    expect(device).toEqual({ code: 0, stdout: 'created public client tv (TV)\nclient_id: tv\n', stderr: '' });
    const web = await runCli(['clients', 'create', '--name', 'Web', '--type', 'confidential', '--scope', 'openid', '--client-id', 'web', '--grant', 'authorization_code', '--redirect-uri', 'https://app.example.com/cb'], t.env);
    expect(web.code, web.stderr).toBe(0);
    const rows = await t.db.kysely.selectFrom('clients').select(['clientId', 'role', 'postLogoutRedirectUris', 'idTokenSignedResponseAlg']).orderBy('id').execute();
    expect(rows).toEqual([
      { clientId: 'native', role: null, postLogoutRedirectUris: '["com.example.app:/signed-out"]', idTokenSignedResponseAlg: 'ES256' },
      { clientId: 'tv', role: null, postLogoutRedirectUris: '[]', idTokenSignedResponseAlg: 'RS256' },
      { clientId: 'web', role: null, postLogoutRedirectUris: '[]', idTokenSignedResponseAlg: 'RS256' },
    ]);

    const table = (await runCli(['clients', 'list'], t.env)).stdout;
    expect(table).toMatch(/\nnative\s+Native\s+public\s+-\s+authorization_code,refresh_token\s+openid\s+jwt\s+600\s+ES256\s/);
    expect(table).toMatch(/\ntv\s+TV\s+public\s+-\s+urn:ietf:params:oauth:grant-type:device_code,refresh_token\s+openid\s+jwt\s+600\s+RS256\s/);
    const shown = await runCli(['clients', 'show', 'native'], t.env);
    const { id, createdAt, updatedAt } = JSON.parse(native.stdout);
    expect(shown).toEqual({
      code: 0,
      stderr: '',
      stdout: [
        'client_id:                 native',
        `id:                        ${id}`,
        'name:                      Native',
        'type:                      public',
        'role:                      -',
        'grants:                    authorization_code,refresh_token',
        'scopes:                    openid',
        'redirect_uris:             http://127.0.0.1:8400/cb http://[::1]/cb com.example.app:/oauth2redirect',
        'post_logout_redirect_uris: com.example.app:/signed-out',
        'format:                    jwt',
        'ttl:                       600',
        'rate_limit:                -',
        'id_token_alg:              ES256',
        'first_party:               no',
        'legacy:                    no',
        `created:                   ${createdAt}`,
        `updated:                   ${updatedAt}`,
        '',
      ].join('\n'),
    });
    expect(JSON.parse((await runCli(['clients', 'show', 'native', '--json'], t.env)).stdout)).toEqual(JSON.parse(native.stdout));
    expect((await runCli(['clients', 'show', 'web'], t.env)).stdout).toContain('\npost_logout_redirect_uris: -\n');
    // Its own rate limit, within the contract's range.
    const limited = await runCli(['clients', 'create', '--name', 'Batch', '--type', 'confidential', '--scope', 'read:posts', '--grant', 'client_credentials', '--role', 'member', '--client-id', 'batch', '--rate-limit', '5000', '--json'], t.env);
    expect(JSON.parse(limited.stdout)).toMatchObject({ clientId: 'batch', rateLimit: 5000 });
    expect((await runCli(['clients', 'show', 'batch'], t.env)).stdout).toContain('\nrate_limit:                5000\n');
    expect(await runCli(['clients', 'create', '--name', 'Batch', '--type', 'confidential', '--scope', 'read:posts', '--grant', 'client_credentials', '--role', 'member', '--rate-limit', '0'], t.env)).toEqual({
      code: 2,
      stdout: '',
      stderr: "error: --rate-limit: must be >= 1\nRun 'portcullis clients create --help' for usage.\n",
    });
    expect(await runCli(['clients', 'show', 'nobody'], t.env)).toEqual({ code: 1, stdout: '', stderr: 'error: no client nobody\n' });
  });

  it("delete removes the client and revokes its tokens, not other clients' tokens; rotate-secret --revoke-tokens revokes", async () => {
    for (const id of ['doomed', 'other']) expect((await runCli([...SERVICE, '--client-id', id], t.env)).code).toBe(0);
    const issuedAt = nowIso();
    const expiresAt = new Date(Date.now() + 600_000).toISOString();
    const token = (jti: string, clientId: string) => ({
      jti, tokenHash: null, format: 'jwt', clientId, subject: clientId, subjectType: 'client', scopes: 'read:users', grantType: 'client_credentials', issuedAt, expiresAt, revokedAt: null,
    });
    await t.db.kysely.insertInto('accessTokens').values([token('d1', 'doomed'), token('o1', 'other')]).execute();

    expect(await runCli(['clients', 'delete', 'doomed'], t.env)).toEqual({ code: 0, stdout: 'deleted client doomed and revoked its tokens\n', stderr: '' });
    expect(await clientRow('doomed')).toBeUndefined();
    const revokedAt = async (jti: string) => (await t.db.kysely.selectFrom('accessTokens').select('revokedAt').where('jti', '=', jti).executeTakeFirstOrThrow()).revokedAt;
    expect(await revokedAt('d1')).not.toBeNull();
    expect(await revokedAt('o1')).toBeNull();
    expect(await runCli(['clients', 'delete', 'doomed'], t.env)).toEqual({ code: 1, stdout: '', stderr: 'error: no client doomed\n' });

    const rotated = await runCli(['clients', 'rotate-secret', 'other', '--revoke-tokens', '--json'], t.env);
    expect(rotated.code).toBe(0);
    const { clientSecret, ...rest } = JSON.parse(rotated.stdout);
    expect(rest).toEqual({ clientId: 'other', tokensRevoked: true });
    expect((await clientRow('other'))!.secretHash).toBe(digestSecret(clientSecret));
    expect(await revokedAt('o1')).not.toBeNull();
    // The client's self-contained JWTs (no rows) end with the count they carry.
    expect((await clientRow('other'))!.revocations).toBe(1);
    const plain = await runCli(['clients', 'rotate-secret', 'other', '--revoke-tokens'], t.env);
    expect(plain.stdout).toMatch(/\nevery access and refresh token issued to the client so far is revoked\n$/);
    expect((await clientRow('other'))!.revocations).toBe(2);
    const kept = JSON.parse((await runCli(['clients', 'rotate-secret', 'other', '--json'], t.env)).stdout);
    expect(kept).toEqual({ clientId: 'other', clientSecret: expect.any(String), tokensRevoked: false });
    expect((await clientRow('other'))!.revocations).toBe(2);
  });
});
