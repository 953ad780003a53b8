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

  it('publishes RFC 8414 metadata listing only what exists', async () => {
    const response = await oauth.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['cache-control']).toBe('public, max-age=300');
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    expect(response.json()).toEqual({
      issuer: ISSUER,
      token_endpoint: `${ISSUER}/oauth/token`,
      jwks_uri: `${ISSUER}/oauth/jwks`,
      scopes_supported: [...SCOPES],
      response_types_supported: [],
      grant_types_supported: ['client_credentials'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
      revocation_endpoint: `${ISSUER}/oauth/revoke`,
      revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    });
  });

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
