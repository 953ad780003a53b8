import { createHash } from 'node:crypto';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import type { TestClient } from '../fixtures.js';
import { Browser } from './browser.js';
import { createUser, createWebClient, exchangeCode, expectTokens, obtainCode, openFlowApp, refresh, type AuthorizeOptions, type FlowApp, type TokenResponse } from './flow.js';

/** OpenID Connect Core §3.1.3.6: base64url of the left half of SHA-256 over the access token's ASCII. */
function expectedAtHash(accessToken: string): string {
  return createHash('sha256').update(accessToken, 'ascii').digest().subarray(0, 16).toString('base64url');
}

describe.each(DATABASE_KINDS)('ID tokens on %s', (kind) => {
  let t: FlowApp;
  let user: UserRecord;
  let rsClient: TestClient;
  let esClient: TestClient;
  let browser: Browser;
  /** The sign-in's time (epoch seconds), as the session recorded it. */
  let signedInAt: number;

  beforeAll(async () => {
    t = await openFlowApp(kind);
    user = await createUser(t.db);
    rsClient = await createWebClient(t.db, { firstParty: true });
    esClient = await createWebClient(t.db, { firstParty: true, idTokenSignedResponseAlg: 'ES256' });
    browser = new Browser(t.oauth.app);
    await obtainCode(t, browser, rsClient, user);
    const session = await t.db.kysely.selectFrom('loginSessions').select('authTime').where('userId', '=', user.id).executeTakeFirstOrThrow();
    signedInAt = Math.floor(Date.parse(session.authTime) / 1000);
  });
  afterAll(async () => {
    await t.close();
  });

  /**
   * Verifies against the JWKS as published now: the RS256 key is made when the first ID token needs it, and
   * a relying party meeting a kid it does not know fetches the set again (OpenID Connect Core §10.1.1).
   */
  async function verify(idToken: string, audience: string, alg: 'RS256' | 'ES256') {
    const published = await t.oauth.app.inject({ method: 'GET', url: '/oauth/jwks' });
    expect(published.statusCode).toBe(200);
    return jwtVerify(idToken, createLocalJWKSet(published.json() as JSONWebKeySet), { issuer: t.config.issuer, audience, algorithms: [alg] });
  }

  async function tokensFor(client: TestClient, options: AuthorizeOptions, expected: { refreshToken: boolean }): Promise<TokenResponse> {
    const { code, verifier } = await obtainCode(t, browser, client, user, options);
    return expectTokens(await exchangeCode(t, client, code, { code_verifier: verifier }), { scope: options.scope!, refreshToken: expected.refreshToken, idToken: true });
  }

  it('is signed RS256 by default, verifies against /oauth/jwks, and carries aud, iss, nonce, auth_time and at_hash', async () => {
    const tokens = await tokensFor(rsClient, { scope: 'openid read:posts', extra: { nonce: 'n-0S6_WzA2Mj' } }, { refreshToken: false });
    const { payload, protectedHeader } = await verify(tokens.id_token!, rsClient.client.clientId, 'RS256');
    expect(protectedHeader).toEqual({ alg: 'RS256', typ: 'JWT', kid: expect.any(String) });
    expect(payload).toEqual({
      iss: t.config.issuer,
      aud: rsClient.client.clientId,
      sub: user.id,
      nonce: 'n-0S6_WzA2Mj',
      auth_time: signedInAt,
      at_hash: expectedAtHash(tokens.access_token),
      iat: expect.any(Number),
      exp: payload.iat! + 600,
    });
  });

  it('carries no email or name: with an access token issued, those claims come from userinfo with email_verified (OpenID Connect Core §5.4)', async () => {
    const client = await createWebClient(t.db, { firstParty: true, scopes: ['openid', 'profile', 'email'] });
    const tokens = await tokensFor(client, { scope: 'openid profile email' }, { refreshToken: false });
    const { payload } = await verify(tokens.id_token!, client.client.clientId, 'RS256');
    expect(Object.keys(payload).sort()).toEqual(['at_hash', 'aud', 'auth_time', 'exp', 'iat', 'iss', 'sub']);
    const userinfo = await t.oauth.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect({ status: userinfo.statusCode, body: userinfo.json() }).toEqual({ status: 200, body: { sub: user.id, name: user.name, email: user.email, email_verified: false } });
  });

  it('leaves nonce out when the request had none', async () => {
    const tokens = await tokensFor(rsClient, { scope: 'openid' }, { refreshToken: false });
    const { payload } = await verify(tokens.id_token!, rsClient.client.clientId, 'RS256');
    expect(payload).not.toHaveProperty('nonce');
    expect(payload.at_hash).toBe(expectedAtHash(tokens.access_token));
  });

  it('is signed ES256 when the client registered that algorithm', async () => {
    const tokens = await tokensFor(esClient, { scope: 'openid read:posts', extra: { nonce: 'es' } }, { refreshToken: false });
    expect(decodeProtectedHeader(tokens.id_token!)).toEqual({ alg: 'ES256', typ: 'JWT', kid: expect.any(String) });
    const { payload } = await verify(tokens.id_token!, esClient.client.clientId, 'ES256');
    expect(payload).toMatchObject({ sub: user.id, nonce: 'es', at_hash: expectedAtHash(tokens.access_token) });
  });

  it('is issued again on refresh with the original auth_time and no nonce (OpenID Connect Core §12.2)', async () => {
    const tokens = await tokensFor(rsClient, { scope: 'openid offline_access', extra: { nonce: 'first' } }, { refreshToken: true });
    const refreshed = expectTokens(await refresh(t, rsClient, tokens.refresh_token!), { scope: 'openid offline_access', refreshToken: true, idToken: true });
    const { payload } = await verify(refreshed.id_token!, rsClient.client.clientId, 'RS256');
    expect(payload).toEqual({
      iss: t.config.issuer,
      aud: rsClient.client.clientId,
      sub: user.id,
      auth_time: signedInAt,
      at_hash: expectedAtHash(refreshed.access_token),
      iat: expect.any(Number),
      exp: payload.iat! + 600,
    });
  });

  it('is not an access token', async () => {
    const tokens = await tokensFor(rsClient, { scope: 'openid read:posts' }, { refreshToken: false });
    await expect(t.oauth.tokens.verifyAccessToken(tokens.id_token!)).rejects.toMatchObject({ name: 'InvalidTokenError' });
    await expect(t.oauth.tokens.verifyAccessToken(tokens.access_token)).resolves.toMatchObject({ subject: user.id });
  });

  it('is not issued without openid', async () => {
    const { code, verifier } = await obtainCode(t, browser, rsClient, user, { scope: 'read:posts' });
    expectTokens(await exchangeCode(t, rsClient, code, { code_verifier: verifier }), { scope: 'read:posts', refreshToken: true, idToken: false });
  });
});
