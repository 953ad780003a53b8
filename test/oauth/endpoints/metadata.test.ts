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
    const response = await oauth.app.inject({ method: 'GET', url });
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('public, max-age=300');
    expect(response.headers['content-type']).toMatch(/^application\/jwk-set\+json/);
    expect(response.json()).toEqual({
      keys: [{ kty: 'EC', crv: 'P-256', x: COORDINATE, y: COORDINATE, kid, alg: 'ES256', use: 'sig' }],
    });
  });

  it('keeps the retired key in the JWKS after a rotation', async () => {
    const before = (await oauth.keys.signingKey()).kid;
    const after = await oauth.keys.rotate();
    const response = await oauth.app.inject({ method: 'GET', url: '/oauth/jwks' });
    expect(response.json().keys.map((key: { kid: string }) => key.kid)).toEqual([after, before]);
  });
});
