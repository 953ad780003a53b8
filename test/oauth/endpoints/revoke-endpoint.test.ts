import { base64url } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../../src/config/config.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { createClient, makeConfig, type TestClient } from '../fixtures.js';
import { basic, buildOAuthApp, form, FORM, type OAuthApp } from '../oauth-app.js';
import { digestSecret, generateSecret, tokenLookupKey } from '../../../src/oauth/secrets.js';
import { revokeClientTokens } from '../../../src/oauth/tokens/access-token-records.js';
import { TokenService } from '../../../src/oauth/tokens/token-service.js';
import { newId } from '../../../src/storage/ids.js';
import { insertRefreshToken } from '../../../src/storage/refresh-tokens.js';

// RFC 7009: a client ends an access or refresh token it holds; every string of it stops working; whether a
// string was ever a token, and whose, is not revealed: anything else is answered like a revocation.

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

describe.each(DATABASE_KINDS)('POST /oauth/revoke on %s', (kind) => {
  let t: TestDatabase;
  let config: Config;
  let oauth: OAuthApp;
  let service: TestClient;
  let other: TestClient;
  let jwtNeighbour: TestClient;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    config = makeConfig();
    oauth = await buildOAuthApp(t.db, config);
    service = await createClient(t.db);
    other = await createClient(t.db, { accessTokenFormat: 'opaque' });
    jwtNeighbour = await createClient(t.db);
  });
  afterAll(async () => {
    await oauth.app.close();
    await t.drop();
  });

  const as = (client: TestClient) => ({ authorization: basic(client.client.clientId, client.secret) });

  async function tokenFor(client: TestClient): Promise<string> {
    const res = await oauth.app.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, ...as(client) }, payload: form({ grant_type: 'client_credentials' }) });
    expect(res.statusCode).toBe(200);
    return res.json().access_token as string;
  }

  function revoke(params: Record<string, string>, headers: Record<string, string> = {}) {
    return oauth.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { ...FORM, ...headers }, payload: form(params) });
  }

  async function countInvalidations(): Promise<number> {
    const row = await t.db.kysely.selectFrom('invalidations').select((eb) => eb.fn.countAll<string | number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  function expectRevoked(res: Awaited<ReturnType<typeof revoke>>) {
    expect({ status: res.statusCode, body: res.body }).toEqual({ status: 200, body: '' });
    expect(res.headers).toMatchObject(NO_STORE);
  }

  it('revokes the client’s own JWT, both encodings of its signature, on every instance', async () => {
    const token = await tokenFor(service);
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const bytes = base64url.decode(signature);
    const n = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
    const s = BigInt(`0x${Buffer.from(bytes.subarray(32)).toString('hex')}`);
    const twin = `${header}.${payload}.${base64url.encode(Buffer.concat([bytes.subarray(0, 32), Buffer.from((n - s).toString(16).padStart(64, '0'), 'hex')]))}`;
    const { jti } = await oauth.tokens.verifyAccessToken(token);
    await oauth.tokens.verifyAccessToken(twin);
    const before = oauth.decisions.length;
    expectRevoked(await revoke({ token: twin, token_type_hint: 'access_token' }, as(service)));
    await expect(oauth.tokens.verifyAccessToken(token)).rejects.toThrow();
    await expect(oauth.tokens.verifyAccessToken(twin)).rejects.toThrow();
    const row = await t.db.kysely.selectFrom('invalidations').selectAll().where('target', '=', jti).executeTakeFirst();
    expect(row).toMatchObject({ kind: 'token', target: jti });
    expect(oauth.decisions.slice(before)).toEqual([
      expect.objectContaining({ interface: 'oauth', operation: 'revoke', clientId: service.client.clientId, resourceType: 'token', resourceId: jti, decision: 'allow', reason: 'granted' }),
    ]);
  });

  it('revokes an opaque token given as client_secret_post, whatever the hint says', async () => {
    const token = await tokenFor(other);
    expectRevoked(await revoke({ token, token_type_hint: 'refresh_token', client_id: other.client.clientId, client_secret: other.secret }));
    await expect(oauth.tokens.verifyAccessToken(token)).rejects.toThrow();
  });

  /** Everything a caller can observe of an answer but its date: status, headers, body. */
  function observable(res: Awaited<ReturnType<typeof revoke>>) {
    const { date: _date, ...headers } = res.headers;
    return { status: res.statusCode, headers, body: res.body };
  }

  /** A refresh token of `client`'s, stored as the token endpoint stores one. */
  async function refreshTokenOf(client: TestClient): Promise<string> {
    const token = generateSecret();
    const now = Date.now();
    await insertRefreshToken(t.db.kysely, {
      tokenHash: digestSecret(token),
      familyId: newId(),
      clientId: client.client.clientId,
      clientRegistrationId: client.client.id,
      userId: newId(),
      scopes: 'read:posts',
      authTime: new Date(now).toISOString(),
      issuedAt: new Date(now).toISOString(),
      expiresAt: new Date(now + 3_600_000).toISOString(),
      rotatedAt: null,
      revokedAt: null,
    });
    return token;
  }

  it('answers a string that is no live token of the caller exactly like a revocation (§2.2), writing nothing and leaving other clients\' tokens working', async () => {
    const own = await tokenFor(service);
    const reference = observable(await revoke({ token: own }, as(service)));
    expect(reference).toEqual({ status: 200, headers: expect.objectContaining(NO_STORE), body: '' });
    // An access token issued an hour ago with the default ten-minute lifetime: expired.
    const past = new TokenService({ db: t.db, config, keys: oauth.keys, clock: () => Date.now() - 3_600_000 });
    const expired = (await past.issueAccessToken({ client: service.client, subject: service.client.id, subjectType: 'client', scopes: ['read:posts'], grantType: 'client_credentials' })).accessToken;
    const othersJwt = await tokenFor(jwtNeighbour);
    const othersOpaque = await tokenFor(other);
    const othersRefresh = await refreshTokenOf(other);
    const [header, payload] = own.split('.') as [string, string];
    const cases: Record<string, string> = {
      'no token at all': 'not-a-token',
      'the shape of an opaque or refresh token': 'A'.repeat(43),
      'a JWT with a forged signature': `${header}.${payload}.${'A'.repeat(86)}`,
      'a malformed JWT': 'eyJ.eyJ.x',
      'an expired token': expired,
      'a token revoked already': own,
      'another client\'s JWT': othersJwt,
      'another client\'s opaque token': othersOpaque,
      'another client\'s refresh token': othersRefresh,
    };
    const invalidations = await countInvalidations();
    const before = oauth.decisions.length;
    for (const [name, token] of Object.entries(cases)) {
      expect({ case: name, ...observable(await revoke({ token }, as(service))) }).toEqual({ case: name, ...reference });
    }
    expect(await countInvalidations()).toBe(invalidations);
    // Each is a refusal with no subject: the audit log counts them per address and window.
    const refused = { requestId: expect.any(String), interface: 'oauth', operation: 'revoke', sourceAddress: '127.0.0.1', subject: null, clientId: service.client.clientId, resourceType: 'token', resourceId: null, decision: 'deny', reason: 'resource' };
    expect(oauth.decisions.slice(before)).toEqual(Object.keys(cases).map(() => refused));
    await expect(oauth.tokens.verifyAccessToken(othersJwt)).resolves.toMatchObject({ clientId: jwtNeighbour.client.clientId });
    await expect(oauth.tokens.verifyAccessToken(othersOpaque)).resolves.toMatchObject({ clientId: other.client.clientId });
    const family = await t.db.kysely.selectFrom('refreshTokens').select('revokedAt').where('tokenHash', '=', digestSecret(othersRefresh)).executeTakeFirstOrThrow();
    expect(family.revokedAt).toBeNull();
  });

  it("answers a self-contained JWT revoked with its client's tokens like any revoked token: nothing written, a refusal recorded", async () => {
    const leaked = await createClient(t.db);
    const token = await tokenFor(leaked);
    const { jti } = await oauth.tokens.verifyAccessToken(token);
    // What `clients rotate-secret --revoke-tokens` commits (the secret aside), as another process would.
    await t.db.kysely.transaction().execute((trx) => revokeClientTokens(trx, leaked.client.clientId, new Date().toISOString()));
    await oauth.invalidations.poll(); // this instance reads the registration again, its new count with it
    const invalidations = await countInvalidations();
    const before = oauth.decisions.length;
    expectRevoked(await revoke({ token }, as(leaked)));
    expect(await t.db.kysely.selectFrom('revokedAccessTokens').select('jti').where('jti', '=', jti).execute()).toEqual([]);
    expect(await countInvalidations()).toBe(invalidations);
    expect(oauth.decisions.slice(before)).toEqual([
      expect.objectContaining({ operation: 'revoke', clientId: leaked.client.clientId, resourceType: 'token', resourceId: null, decision: 'deny', reason: 'resource' }),
    ]);
  });

  it("revokes a self-contained JWT issued under a later count than the registration this instance still holds", async () => {
    const held = await createClient(t.db);
    await oauth.invalidations.stop();
    await tokenFor(held); // this instance holds the registration (count 0) from here on
    const elsewhere = await buildOAuthApp(t.db, config);
    try {
      await t.db.kysely.transaction().execute((trx) => revokeClientTokens(trx, held.client.clientId, new Date().toISOString()));
      // Another instance, which read the registration after the revocation, issues a token under count 1.
      const res = await elsewhere.app.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, ...as(held) }, payload: form({ grant_type: 'client_credentials' }) });
      const token = res.json().access_token as string;
      const { jti } = await elsewhere.tokens.verifyAccessToken(token);
      expectRevoked(await revoke({ token }, as(held)));
      expect(await t.db.kysely.selectFrom('revokedAccessTokens').select('jti').where('jti', '=', jti).execute()).toEqual([{ jti }]);
      await elsewhere.invalidations.poll(); // the instance that issued it follows the revocation
      await expect(elsewhere.tokens.verifyAccessToken(token)).rejects.toThrow();
    } finally {
      await elsewhere.app.close();
      await oauth.invalidations.start();
    }
  });

  it("leaves a self-contained JWT of a deleted registration alone when the client_id registered again revokes it", async () => {
    const first = await createClient(t.db);
    const token = await tokenFor(first);
    const { jti } = await oauth.tokens.verifyAccessToken(token);
    await t.db.kysely.transaction().execute(async (trx) => {
      await revokeClientTokens(trx, first.client.clientId, new Date().toISOString());
      await trx.deleteFrom('clients').where('id', '=', first.client.id).execute();
    });
    const again = await createClient(t.db, { clientId: first.client.clientId });
    await oauth.invalidations.poll();
    const invalidations = await countInvalidations();
    expectRevoked(await revoke({ token }, as(again)));
    expect(await t.db.kysely.selectFrom('revokedAccessTokens').select('jti').where('jti', '=', jti).execute()).toEqual([]);
    expect(await countInvalidations()).toBe(invalidations);
  });

  it('revokes the client\'s own refresh token and its whole grant', async () => {
    const token = await refreshTokenOf(service);
    const row = await t.db.kysely.selectFrom('refreshTokens').select('familyId').where('tokenHash', '=', tokenLookupKey(token)).executeTakeFirstOrThrow();
    const before = oauth.decisions.length;
    expectRevoked(await revoke({ token, token_type_hint: 'refresh_token' }, as(service)));
    const revoked = await t.db.kysely.selectFrom('refreshTokens').select('revokedAt').where('tokenHash', '=', tokenLookupKey(token)).executeTakeFirstOrThrow();
    expect(revoked.revokedAt).not.toBeNull();
    expect(await t.db.kysely.selectFrom('invalidations').select('kind').where('target', '=', row.familyId).execute()).toEqual([{ kind: 'grant' }]);
    expect(oauth.decisions.slice(before)).toEqual([
      expect.objectContaining({ operation: 'revoke', clientId: service.client.clientId, resourceType: 'grant', resourceId: row.familyId, decision: 'allow', reason: 'granted' }),
    ]);
  });

  it('requires client authentication and a token', async () => {
    const token = await tokenFor(service);
    const anonymous = await revoke({ token });
    expect({ status: anonymous.statusCode, error: anonymous.json().error }).toEqual({ status: 401, error: 'invalid_client' });
    const wrongSecret = await revoke({ token }, { authorization: basic(service.client.clientId, 'wrong-secret') });
    expect({ status: wrongSecret.statusCode, error: wrongSecret.json().error }).toEqual({ status: 401, error: 'invalid_client' });
    await expect(oauth.tokens.verifyAccessToken(token)).resolves.toBeDefined();
    const missing = await revoke({}, as(service));
    expect({ status: missing.statusCode, body: missing.json() }).toEqual({ status: 400, body: { error: 'invalid_request', error_description: 'token is required.' } });
  });
});
