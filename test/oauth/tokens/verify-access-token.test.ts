import {
  base64url,
  decodeJwt,
  decodeProtectedHeader,
  exportSPKI,
  generateKeyPair,
  importJWK,
  SignJWT,
  type CryptoKey,
  type JWTPayload,
} from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../../src/config/config.js';
import { KeyStore } from '../../../src/oauth/keys/key-store.js';
import { insertAccessToken } from '../../../src/oauth/tokens/access-token-records.js';
import { InvalidTokenError } from '../../../src/oauth/tokens/invalid-token-error.js';
import { TokenService } from '../../../src/oauth/tokens/token-service.js';
import { digestSecret, generateSecret } from '../../../src/oauth/secrets.js';
import type { VerifiedToken } from '../../../src/oauth/tokens/verified-token.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { createClient, ISSUER, makeConfig, type TestClient } from '../fixtures.js';

describe.each(DATABASE_KINDS)('access-token verification on %s', (kind) => {
  let t: TestDatabase;
  let config: Config;
  let keys: KeyStore;
  let jwtClient: TestClient;
  let opaqueClient: TestClient;
  let now: number;
  const clock = () => now;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    config = makeConfig();
    keys = await KeyStore.open(t.db, config);
    jwtClient = await createClient(t.db);
    opaqueClient = await createClient(t.db, { accessTokenFormat: 'opaque', accessTokenTtl: 300 });
  });
  afterAll(() => t.drop());

  /** A fresh service per test, so no test is answered from another's cache. */
  function service(): TokenService {
    now = Date.now();
    return new TokenService({ db: t.db, config, keys, clock });
  }

  async function issue(tokens: TokenService, client: TestClient = jwtClient) {
    const { clientId } = client.client;
    return tokens.issueAccessToken({
      client: client.client,
      subject: clientId,
      subjectType: 'client',
      scopes: ['read:posts'],
      grantType: 'client_credentials',
    });
  }

  /** A genuine token (its row exists) re-signed with our key after changing its header or claims. */
  async function forge(tokens: TokenService, change: { header?: Record<string, unknown>; claims?: JWTPayload; drop?: string[] }) {
    const { accessToken } = await issue(tokens);
    const claims: JWTPayload = { ...decodeJwt(accessToken), ...change.claims };
    for (const name of change.drop ?? []) delete claims[name];
    const signer = await keys.signingKey();
    const header = { ...decodeProtectedHeader(accessToken), ...change.header } as { alg: string };
    return new SignJWT(claims).setProtectedHeader(header).sign(signer.privateKey);
  }

  async function reasonFor(tokens: TokenService, token: string): Promise<string> {
    const error: unknown = await tokens.verifyAccessToken(token).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidTokenError);
    const invalid = error as InvalidTokenError;
    // Neither the message nor the logged reason ever repeats the token.
    expect(invalid.message).not.toContain(token);
    expect(invalid.reason).not.toContain(token);
    return invalid.reason;
  }

  const seconds = () => Math.floor(now / 1000);

  describe('accepts', () => {
    it('a valid client-credentials JWT, as RFC 9068 shapes it, self-contained: no row is stored', async () => {
      const tokens = service();
      const issued = await issue(tokens);
      expect(issued).toEqual({
        accessToken: expect.any(String),
        tokenType: 'Bearer',
        expiresIn: 600,
        scope: 'read:posts',
        jti: expect.any(String),
      });
      expect(decodeProtectedHeader(issued.accessToken)).toEqual({ alg: 'ES256', typ: 'at+jwt', kid: (await keys.signingKey()).kid });
      expect(decodeJwt(issued.accessToken)).toEqual({
        iss: ISSUER,
        aud: ISSUER,
        sub: jwtClient.client.clientId,
        client_id: jwtClient.client.clientId,
        jti: issued.jti,
        scope: 'read:posts',
        iat: seconds(),
        exp: seconds() + 600,
        reg: jwtClient.client.id,
        rev: 0,
      });
      expect(await t.db.kysely.selectFrom('accessTokens').select('jti').where('jti', '=', issued.jti).executeTakeFirst()).toBeUndefined();
      await expect(tokens.verifyAccessToken(issued.accessToken)).resolves.toEqual({
        jti: issued.jti,
        format: 'jwt',
        clientId: jwtClient.client.clientId,
        clientRegistrationId: jwtClient.client.id,
        subject: jwtClient.client.clientId,
        subjectType: 'client',
        scopes: ['read:posts'],
        grantType: 'client_credentials',
        grantId: null,
        clientRevocations: 0,
        issuedAt: seconds(),
        expiresAt: seconds() + 600,
      } satisfies VerifiedToken);
    });

    it("a user grant's JWT, by its row", async () => {
      const tokens = service();
      const { issued, row } = await tokens.signAccessToken({
        client: jwtClient.client,
        subject: 'user-1',
        subjectType: 'user',
        scopes: ['read:posts'],
        grantType: 'authorization_code',
        grantId: 'grant-1',
      });
      expect(decodeJwt(issued.accessToken)).not.toHaveProperty('reg');
      expect(decodeJwt(issued.accessToken)).not.toHaveProperty('rev');
      await insertAccessToken(t.db.kysely, row);
      await expect(tokens.verifyAccessToken(issued.accessToken)).resolves.toEqual({
        jti: issued.jti,
        format: 'jwt',
        clientId: jwtClient.client.clientId,
        clientRegistrationId: jwtClient.client.id,
        subject: 'user-1',
        subjectType: 'user',
        scopes: ['read:posts'],
        grantType: 'authorization_code',
        grantId: 'grant-1',
        clientRevocations: null,
        issuedAt: seconds(),
        expiresAt: seconds() + 600,
      } satisfies VerifiedToken);
    });

    it('a valid opaque token, stored only as its digest', async () => {
      const tokens = service();
      const issued = await issue(tokens, opaqueClient);
      expect(issued.accessToken).toMatch(/^[0-9a-f]{12}[A-Za-z0-9_-]{43}$/);
      const row = await t.db.kysely.selectFrom('accessTokens').selectAll().where('jti', '=', issued.jti).executeTakeFirstOrThrow();
      expect(row.tokenHash).toBe(`${issued.accessToken.slice(0, 12)}${digestSecret(issued.accessToken)}`);
      expect(JSON.stringify(row)).not.toContain(issued.accessToken);
      await expect(tokens.verifyAccessToken(issued.accessToken)).resolves.toEqual({
        jti: issued.jti,
        format: 'opaque',
        clientId: opaqueClient.client.clientId,
        clientRegistrationId: opaqueClient.client.id,
        subject: opaqueClient.client.clientId,
        subjectType: 'client',
        scopes: ['read:posts'],
        grantType: 'client_credentials',
        grantId: null,
        clientRevocations: null,
        issuedAt: seconds(),
        expiresAt: seconds() + 300,
      } satisfies VerifiedToken);
    });

    it('an opaque token of the shape made before the time prefix (its digest is its key)', async () => {
      const tokens = service();
      const older = generateSecret();
      await insertAccessToken(t.db.kysely, {
        jti: 'older-opaque', tokenHash: digestSecret(older), format: 'opaque', clientId: opaqueClient.client.clientId, clientRegistrationId: opaqueClient.client.id,
        subject: opaqueClient.client.clientId, subjectType: 'client', scopes: 'read:posts', grantType: 'client_credentials',
        issuedAt: new Date(now).toISOString(), expiresAt: new Date(now + 300_000).toISOString(), revokedAt: null, grantId: null,
      });
      await expect(tokens.verifyAccessToken(older)).resolves.toMatchObject({ jti: 'older-opaque', format: 'opaque' });
    });

    it('a JWT expired less than the 30 s skew ago, or issued up to 30 s in the future', async () => {
      const tokens = service();
      const lateToken = await forge(tokens, { claims: { exp: seconds() - 25 } });
      await expect(tokens.verifyAccessToken(lateToken)).resolves.toMatchObject({ expiresAt: seconds() - 25 });
      const earlyToken = await forge(tokens, { claims: { iat: seconds() + 25, nbf: seconds() + 25 } });
      await expect(tokens.verifyAccessToken(earlyToken)).resolves.toMatchObject({ issuedAt: seconds() + 25 });
    });

    it('the typ spelled as the full media type application/at+jwt (RFC 9068 §4)', async () => {
      const tokens = service();
      await expect(tokens.verifyAccessToken(await forge(tokens, { header: { typ: 'application/at+jwt' } }))).resolves.toBeDefined();
    });
  });

  describe('rejects', () => {
    it('alg none', async () => {
      const tokens = service();
      const { accessToken } = await issue(tokens);
      const [, payload] = accessToken.split('.');
      const header = base64url.encode(JSON.stringify({ alg: 'none', typ: 'at+jwt', kid: (await keys.signingKey()).kid }));
      expect(await reasonFor(tokens, `${header}.${payload}.`)).toBe('alg not allowed');
    });

    it('HS256 keyed with the public key (algorithm confusion)', async () => {
      const tokens = service();
      const { accessToken } = await issue(tokens);
      const published = (await keys.publicJwks()).keys.find((key) => key.alg === 'ES256');
      const spki = await exportSPKI((await importJWK(published!, 'ES256', { extractable: true })) as CryptoKey);
      for (const secret of [JSON.stringify(published), spki]) {
        const forged = await new SignJWT(decodeJwt(accessToken))
          .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: published!.kid })
          .sign(new TextEncoder().encode(secret));
        expect(await reasonFor(tokens, forged)).toBe('alg not allowed');
      }
    });

    it('another spelling of the same signature: padded, or with stray bits in its last character', async () => {
      const tokens = service();
      const { accessToken } = await issue(tokens);
      const [header, payload, signature] = accessToken.split('.') as [string, string, string];
      // 64 bytes take 86 base64url characters, the last carrying 4 unused bits: a lenient decoder reads the
      // same bytes from each of these.
      const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
      const last = alphabet.indexOf(signature.at(-1)!);
      const strayBits = `${signature.slice(0, -1)}${alphabet[last ^ 1]}`;
      expect(Buffer.from(strayBits, 'base64url').equals(Buffer.from(signature, 'base64url'))).toBe(true);
      for (const spelling of [`${signature}==`, strayBits]) {
        expect(await reasonFor(tokens, `${header}.${payload}.${spelling}`)).toBe('not in canonical form');
      }
      expect(await reasonFor(tokens, `${header}==.${payload}.${signature}`)).toBe('not in canonical form');
      await expect(tokens.verifyAccessToken(accessToken)).resolves.toMatchObject({ format: 'jwt' });
    });

    it('an unknown kid', async () => {
      const tokens = service();
      const stranger = await generateKeyPair('ES256');
      const { accessToken } = await issue(tokens);
      const forged = await new SignJWT(decodeJwt(accessToken))
        .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'not-ours' })
        .sign(stranger.privateKey);
      expect(await reasonFor(tokens, forged)).toBe('unknown kid');
    });

    it('a token signed by another key under our kid', async () => {
      const tokens = service();
      const stranger = await generateKeyPair('ES256');
      const { accessToken } = await issue(tokens);
      const forged = await new SignJWT(decodeJwt(accessToken))
        .setProtectedHeader(decodeProtectedHeader(accessToken) as { alg: string })
        .sign(stranger.privateKey);
      expect(await reasonFor(tokens, forged)).toBe('signature invalid');
    });

    it('a wrong iss', async () => {
      const tokens = service();
      expect(await reasonFor(tokens, await forge(tokens, { claims: { iss: 'https://evil.example' } }))).toBe('iss check_failed');
    });

    it('a wrong aud', async () => {
      const tokens = service();
      expect(await reasonFor(tokens, await forge(tokens, { claims: { aud: 'https://api.elsewhere.example' } }))).toBe('aud check_failed');
    });

    it('a wrong or missing typ', async () => {
      const tokens = service();
      expect(await reasonFor(tokens, await forge(tokens, { header: { typ: 'JWT' } }))).toBe('typ check_failed');
      expect(await reasonFor(tokens, await forge(tokens, { header: { typ: undefined } }))).toBe('typ check_failed');
    });

    it('an expired token, beyond the skew', async () => {
      const tokens = service();
      expect(await reasonFor(tokens, await forge(tokens, { claims: { exp: seconds() - 31 } }))).toBe('expired (exp)');
    });

    it('a token not yet valid (nbf) beyond the skew', async () => {
      const tokens = service();
      expect(await reasonFor(tokens, await forge(tokens, { claims: { nbf: seconds() + 60 } }))).toBe('nbf check_failed');
    });

    it('a token issued in the future (iat) beyond the skew', async () => {
      const tokens = service();
      expect(await reasonFor(tokens, await forge(tokens, { claims: { iat: seconds() + 60 } }))).toBe('iat check_failed');
    });

    it('a tampered payload', async () => {
      const tokens = service();
      const { accessToken } = await issue(tokens);
      const [header, , signature] = accessToken.split('.');
      const escalated = base64url.encode(JSON.stringify({ ...decodeJwt(accessToken), scope: 'read:posts write:users' }));
      expect(await reasonFor(tokens, `${header}.${escalated}.${signature}`)).toBe('signature invalid');
    });

    it('a tampered signature', async () => {
      const tokens = service();
      const { accessToken } = await issue(tokens);
      const [header, payload, signature] = accessToken.split('.') as [string, string, string];
      const bytes = base64url.decode(signature);
      bytes[10] = bytes[10]! ^ 0x01;
      expect(await reasonFor(tokens, `${header}.${payload}.${base64url.encode(bytes)}`)).toBe('signature invalid');
    });

    it('a token missing a required claim', async () => {
      const tokens = service();
      for (const claim of ['client_id', 'sub', 'jti', 'scope', 'iat', 'exp']) {
        expect(await reasonFor(tokens, await forge(tokens, { drop: [claim] }))).toBe(`${claim} missing`);
      }
    });

    it('an oversized token, before any parsing', async () => {
      const tokens = service();
      const oversized = `${'a'.repeat(config.tokens.maxTokenLength - 1)}.b`;
      expect(await reasonFor(tokens, oversized)).toBe('too long');
    });

    it('a revoked JWT, also on an instance that never saw the revocation', async () => {
      const issuer = service();
      const { accessToken, jti } = await issue(issuer);
      await issuer.revokeToken(await issuer.verifyAccessToken(accessToken));
      expect(await reasonFor(issuer, accessToken)).toBe('revoked');
      expect(await reasonFor(service(), accessToken)).toBe('revoked');
      // Listed until the token's own expiry, and an invalidation tells every other instance.
      expect(await t.db.kysely.selectFrom('revokedAccessTokens').selectAll().where('jti', '=', jti).execute()).toEqual([
        { jti, expiresAt: new Date((seconds() + 600) * 1000).toISOString() },
      ]);
      expect(await t.db.kysely.selectFrom('invalidations').select(['kind', 'target']).where('target', '=', jti).execute()).toEqual([{ kind: 'token', target: jti }]);
    });

    it("a user grant's JWT whose row is gone", async () => {
      const tokens = service();
      const { issued } = await tokens.signAccessToken({
        client: jwtClient.client,
        subject: 'user-1',
        subjectType: 'user',
        scopes: ['read:posts'],
        grantType: 'authorization_code',
        grantId: 'grant-1',
      });
      expect(await reasonFor(tokens, issued.accessToken)).toBe('no record');
    });

    it('a self-contained JWT turned into one that claims a row, or into a user token, or with half its registration claims', async () => {
      const tokens = service();
      expect(await reasonFor(tokens, await forge(tokens, { drop: ['reg', 'rev'] }))).toBe('no record');
      expect(await reasonFor(tokens, await forge(tokens, { claims: { sub: 'user-1' } }))).toBe('claims mismatch');
      expect(await reasonFor(tokens, await forge(tokens, { drop: ['rev'] }))).toBe('claim types');
      expect(await reasonFor(tokens, await forge(tokens, { drop: ['reg'] }))).toBe('claim types');
      expect(await reasonFor(tokens, await forge(tokens, { claims: { rev: '0' } }))).toBe('claim types');
      expect(await reasonFor(tokens, await forge(tokens, { claims: { rev: -1 } }))).toBe('claim types');
      expect(await reasonFor(tokens, await forge(tokens, { claims: { reg: '' } }))).toBe('claim types');
    });

    it('an unknown opaque token', async () => {
      const tokens = service();
      expect(await reasonFor(tokens, 'A'.repeat(43))).toBe('unknown');
      expect(await reasonFor(tokens, 'not an opaque token')).toBe('malformed');
    });

    it('an expired opaque token', async () => {
      const tokens = service();
      const { accessToken } = await issue(tokens, opaqueClient);
      now += (300 + config.tokens.clockSkew - 1) * 1000;
      await expect(tokens.verifyAccessToken(accessToken)).resolves.toBeDefined();
      now += 1000;
      expect(await reasonFor(tokens, accessToken)).toBe('expired');
    });

    it('both encodings of a malleated ES256 signature once the jti is revoked', async () => {
      const tokens = service();
      const { accessToken, jti } = await issue(tokens);
      const malleated = malleate(accessToken);
      expect(malleated).not.toBe(accessToken);
      // ECDSA accepts (r, n - s) as well as (r, s): one token, two strings, both verify and are cached.
      await expect(tokens.verifyAccessToken(accessToken)).resolves.toMatchObject({ jti });
      await expect(tokens.verifyAccessToken(malleated)).resolves.toMatchObject({ jti });
      expect(tokens.cachedAccessToken(malleated)?.jti).toBe(jti);
      await tokens.revokeToken(tokens.cachedAccessToken(accessToken)!);
      expect(tokens.cachedAccessToken(accessToken)).toBeNull();
      expect(tokens.cachedAccessToken(malleated)).toBeNull();
      expect(await reasonFor(tokens, accessToken)).toBe('revoked');
      expect(await reasonFor(tokens, malleated)).toBe('revoked');
    });

    it('both encodings of a malleated signature when another instance announces the revocation', async () => {
      const tokens = service();
      const { accessToken, jti } = await issue(tokens);
      const malleated = malleate(accessToken);
      await tokens.verifyAccessToken(accessToken);
      await tokens.verifyAccessToken(malleated);
      const other = service();
      await other.revokeToken(await other.verifyAccessToken(accessToken));
      tokens.evictJti(jti);
      expect(await reasonFor(tokens, malleated)).toBe('revoked');
      expect(await reasonFor(tokens, accessToken)).toBe('revoked');
    });

    it('a revoked opaque token', async () => {
      const tokens = service();
      const { accessToken } = await issue(tokens, opaqueClient);
      await tokens.revokeToken(await tokens.verifyAccessToken(accessToken));
      expect(await reasonFor(tokens, accessToken)).toBe('revoked');
      expect(await reasonFor(service(), accessToken)).toBe('revoked');
    });
  });
});

/** The order of the P-256 group. */
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

/** The same JWS with its ES256 signature (r, s) replaced by the equally valid (r, n - s). */
function malleate(jws: string): string {
  const [header, payload, signature] = jws.split('.') as [string, string, string];
  const bytes = base64url.decode(signature);
  const s = BigInt(`0x${Buffer.from(bytes.subarray(32)).toString('hex')}`);
  const flipped = Buffer.from((P256_N - s).toString(16).padStart(64, '0'), 'hex');
  return `${header}.${payload}.${base64url.encode(Buffer.concat([bytes.subarray(0, 32), flipped]))}`;
}
