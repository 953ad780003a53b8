import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { ISSUER, makeConfig } from '../fixtures.js';
import { buildOAuthApp, SCOPES, type OAuthApp } from '../oauth-app.js';

/** A P-256 coordinate: 32 bytes, base64url. */
const COORDINATE = expect.stringMatching(/^[A-Za-z0-9_-]{43}$/);

describe.each(DATABASE_KINDS)('discovery and JWKS on %s', (kind) => {
  let t: TestDatabase;
  let oauth: OAuthApp;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    oauth = await buildOAuthApp(t.db, makeConfig());
  });
  afterAll(async () => {
    await oauth.app.close();
    await t.drop();
  });

  it.each(['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'])(
    'publishes RFC 8414 / OpenID Connect Discovery metadata at %s listing only what exists',
    async (url) => {
      const response = await oauth.app.inject({ method: 'GET', url });
      expect(response.statusCode).toBe(200);
      expect(response.headers['cache-control']).toBe('public, max-age=300');
      expect(response.headers['content-type']).toMatch(/^application\/json/);
      expect(response.json()).toEqual({
        issuer: ISSUER,
        authorization_endpoint: `${ISSUER}/oauth/authorize`,
        token_endpoint: `${ISSUER}/oauth/token`,
        userinfo_endpoint: `${ISSUER}/oauth/userinfo`,
        jwks_uri: `${ISSUER}/oauth/jwks`,
        device_authorization_endpoint: `${ISSUER}/oauth/device_authorization`,
        revocation_endpoint: `${ISSUER}/oauth/revoke`,
        introspection_endpoint: `${ISSUER}/oauth/introspect`,
        end_session_endpoint: `${ISSUER}/oauth/logout`,
        scopes_supported: [...SCOPES],
        response_types_supported: ['code'],
        response_modes_supported: ['query'],
        grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials', 'urn:ietf:params:oauth:grant-type:device_code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256', 'ES256'],
        code_challenge_methods_supported: ['S256'],
        token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
        revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
        introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
        claims_supported: ['sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'at_hash', 'name', 'email', 'email_verified'],
        prompt_values_supported: ['none', 'login', 'consent'],
        authorization_response_iss_parameter_supported: true,
        request_parameter_supported: false,
        request_uri_parameter_supported: false,
        claims_parameter_supported: false,
      });
    },
  );

  it.each(['/oauth/jwks', '/.well-known/jwks.json'])('serves the public keys at %s', async (url) => {
    const { kid } = await oauth.keys.signingKey();
    const idTokenKid = (await oauth.keys.signingKey('RS256')).kid;
    const response = await oauth.app.inject({ method: 'GET', url });
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('public, max-age=300');
    expect(response.headers['content-type']).toMatch(/^application\/jwk-set\+json/);
    // Both keys from the start: the ID-token key is published before the first ID token is signed.
    expect(response.json().keys.sort((a: { alg: string }, b: { alg: string }) => a.alg.localeCompare(b.alg))).toEqual([
      { kty: 'EC', crv: 'P-256', x: COORDINATE, y: COORDINATE, kid, alg: 'ES256', use: 'sig' },
      { kty: 'RSA', n: expect.stringMatching(/^[A-Za-z0-9_-]{342}$/), e: 'AQAB', kid: idTokenKid, alg: 'RS256', use: 'sig' },
    ]);
  });

  it('lists the next keys as soon as a rotation makes them, before they sign, beside the signing ones', async () => {
    const before = [(await oauth.keys.signingKey()).kid, (await oauth.keys.signingKey('RS256')).kid];
    const rotation = await oauth.keys.rotate();
    const response = await oauth.app.inject({ method: 'GET', url: '/oauth/jwks' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('public, max-age=300');
    const kids = (alg: string) => response.json().keys.filter((key: { alg: string }) => key.alg === alg).map((key: { kid: string }) => key.kid);
    expect(kids('ES256')).toEqual([rotation.kid, before[0]]);
    expect(kids('RS256')).toEqual([rotation.idTokenKid, before[1]]);
    // The new keys wait: tokens are still signed with the keys every cached JWKS already holds.
    expect((await oauth.keys.signingKey()).kid).toBe(before[0]);
    expect((await oauth.keys.signingKey('RS256')).kid).toBe(before[1]);
  });
});
