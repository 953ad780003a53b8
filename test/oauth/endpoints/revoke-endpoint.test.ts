import { base64url } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../../src/config/config.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { createClient, makeConfig, type TestClient } from '../fixtures.js';
import { basic, buildOAuthApp, form, FORM, type OAuthApp } from '../oauth-app.js';

// RFC 7009: a client ends an access token it holds; every string of it stops working; another client's
// token is refused; whether a string was ever a token is not revealed.

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

describe.each(DATABASE_KINDS)('POST /oauth/revoke on %s', (kind) => {
  let t: TestDatabase;
  let config: Config;
  let oauth: OAuthApp;
  let service: TestClient;
  let other: TestClient;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    config = makeConfig();
    oauth = await buildOAuthApp(t.db, config);
    service = await createClient(t.db);
    other = await createClient(t.db, { accessTokenFormat: 'opaque' });
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

  it('answers 200 for a string that is no token, or is already revoked, revealing nothing', async () => {
    expectRevoked(await revoke({ token: 'not-a-token' }, as(service)));
    expectRevoked(await revoke({ token: 'A'.repeat(43) }, as(service)));
    const token = await tokenFor(service);
    expectRevoked(await revoke({ token }, as(service)));
    expectRevoked(await revoke({ token }, as(service)));
  });

  it('refuses another client’s token and leaves it working', async () => {
    const token = await tokenFor(other);
    const res = await revoke({ token }, as(service));
    expect({ status: res.statusCode, body: res.json() }).toEqual({
      status: 400,
      body: { error: 'unauthorized_client', error_description: 'The token was not issued to this client.' },
    });
    await expect(oauth.tokens.verifyAccessToken(token)).resolves.toMatchObject({ clientId: other.client.clientId });
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
