/**
 * The authorization server as a strict, independent client library sees it: oauth4webapi (which follows
 * RFC 6749, 7636, 8414, 8628, 7009, 7662, 9207 and OpenID Connect to the letter) against a server listening on
 * a real socket, with the browser's part — the login and consent pages — done by a user agent that keeps
 * cookies and submits the forms as served. The only concession is plain http on 127.0.0.1.
 */
import { createHash } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEVICE_CODE } from '../../src/oauth/device/device-authorization.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { freePort } from '../helpers/server-process.js';
import { overSocket, SignInBrowser } from '../helpers/sign-in-browser.js';
import { createClient } from '../oauth/fixtures.js';

const http = { [oauth.allowInsecureRequests]: true } as const;
const REDIRECT_URI = 'https://app.example.test/callback';
const WEB_SCOPES = 'openid profile email offline_access read:posts';

interface Registered {
  client: oauth.Client;
  secret: string;
}

describe.each(DATABASE_KINDS)('oauth4webapi against a listening server on %s', (kind) => {
  let t: TestApp;
  let issuer: string;
  let as: oauth.AuthorizationServer;
  let user: TestUser;
  let userName: string;
  let password: string;
  /** A confidential web application, not first-party: the user sees the consent page. One per ID token algorithm. */
  let web: Record<'RS256' | 'ES256', Registered>;
  let service: Registered;
  let device: Registered;
  /** The user's browser: signs in on the first visit and stays signed in, as people do. */
  let browser: SignInBrowser;

  beforeAll(async () => {
    const port = await freePort();
    issuer = `http://127.0.0.1:${port}`;
    t = await startTestApp(kind, { ISSUER: issuer });
    await t.app.fastify.listen({ port, host: '127.0.0.1' });
    const db = t.app.db;
    const webClient = async (alg: 'RS256' | 'ES256'): Promise<Registered> => {
      const { client, secret } = await createClient(db, {
        name: `Web application (${alg})`,
        grantTypes: ['authorization_code', 'refresh_token'],
        redirectUris: [REDIRECT_URI],
        scopes: WEB_SCOPES.split(' '),
        role: null,
        idTokenSignedResponseAlg: alg,
      });
      return { client: { client_id: client.clientId, id_token_signed_response_alg: alg }, secret };
    };
    web = { RS256: await webClient('RS256'), ES256: await webClient('ES256') };
    const services = await createClient(db, { grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member' });
    service = { client: { client_id: services.client.clientId }, secret: services.secret };
    const devices = await createClient(db, { type: 'public', secretHash: null, grantTypes: [DEVICE_CODE, 'refresh_token'], scopes: ['openid', 'offline_access', 'read:posts'], role: null });
    device = { client: { client_id: devices.client.clientId }, secret: '' };
    user = await t.createUser('member');
    password = await user.password();
    userName = (await db.kysely.selectFrom('users').select('name').where('id', '=', user.id).executeTakeFirstOrThrow()).name;
    browser = new SignInBrowser(overSocket(issuer), issuer);
    as = await oauth.processDiscoveryResponse(new URL(issuer), await oauth.discoveryRequest(new URL(issuer), { ...http, algorithm: 'oidc' }));
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Authorization code + PKCE (+ nonce) through the pages; the validated callback parameters and what the client kept. */
  async function authorize(registered: Registered) {
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const nonce = oauth.generateRandomNonce();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      client_id: registered.client.client_id,
      redirect_uri: REDIRECT_URI,
      response_type: 'code',
      scope: WEB_SCOPES,
      state,
      nonce,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    }).toString();
    const outcome = await browser.visit(url.href, { email: user.email, password });
    expect(outcome.page?.body).toBeUndefined();
    // RFC 9207: validateAuthResponse checks `iss` against the discovered issuer, and `state`.
    const params = oauth.validateAuthResponse(as, registered.client, outcome.redirect!, state);
    return { params, verifier, nonce };
  }

  async function signIn(registered: Registered) {
    const { params, verifier, nonce } = await authorize(registered);
    const auth = oauth.ClientSecretBasic(registered.secret);
    const response = await oauth.authorizationCodeGrantRequest(as, registered.client, auth, params, REDIRECT_URI, verifier, http);
    const tokens = await oauth.processAuthorizationCodeResponse(as, registered.client, response, { expectedNonce: nonce, maxAge: 300 });
    return { tokens, response, nonce };
  }

  async function api(token: string, path: string): Promise<Response> {
    return oauth.protectedResourceRequest(token, 'GET', new URL(path, issuer), new Headers(), null, http);
  }

  it('discovers the same metadata at both well-known addresses', async () => {
    const oauth2 = await oauth.processDiscoveryResponse(new URL(issuer), await oauth.discoveryRequest(new URL(issuer), { ...http, algorithm: 'oauth2' }));
    expect(oauth2).toEqual(as);
    expect(as.issuer).toBe(issuer);
    expect(as.authorization_response_iss_parameter_supported).toBe(true);
  });

  it.each(['RS256', 'ES256'] as const)('signs a user in with the authorization code, PKCE, iss and a %s ID token; userinfo names the same subject', async (alg) => {
    const registered = web[alg];
    const { tokens, response, nonce } = await signIn(registered);
    expect({ token_type: tokens.token_type, scope: tokens.scope, refresh: typeof tokens.refresh_token }).toEqual({ token_type: 'bearer', scope: WEB_SCOPES, refresh: 'string' });

    const claims = oauth.getValidatedIdTokenClaims(tokens)!;
    expect(claims).toMatchObject({ iss: issuer, aud: registered.client.client_id, sub: user.id, nonce });
    expect(typeof claims.auth_time).toBe('number');
    // The signature, against the key oauth4webapi finds at jwks_uri by the header's kid.
    await oauth.validateApplicationLevelSignature(as, response, http);
    // OpenID Connect Core §3.1.3.6: at_hash is the left half of the access token's SHA-256.
    const digest = createHash('sha256').update(tokens.access_token).digest();
    expect(claims.at_hash).toBe(digest.subarray(0, 16).toString('base64url'));

    const userinfo = await oauth.processUserInfoResponse(as, registered.client, claims.sub, await oauth.userInfoRequest(as, registered.client, tokens.access_token, http));
    expect(userinfo).toEqual({ sub: user.id, name: userName, email: user.email, email_verified: false });

    // RFC 9068, as a resource server checks it: typ at+jwt, the claims, the signature by a key at jwks_uri.
    const atClaims = await oauth.validateJwtAccessToken(as, new Request(`${issuer}/v1/posts`, { headers: { authorization: `Bearer ${tokens.access_token}` } }), issuer, {
      ...http,
      signingAlgorithms: ['ES256'],
    });
    expect(atClaims).toMatchObject({ iss: issuer, aud: issuer, sub: user.id, client_id: registered.client.client_id, scope: WEB_SCOPES });

    const principal = await api(tokens.access_token, '/v1/authorization');
    expect(principal.status).toBe(200);
    expect((await principal.json()).principal).toEqual({ type: 'user', id: user.id, clientId: registered.client.client_id, role: 'member' });
  });

  it('sends the user who denies back with access_denied and iss, which the client validates (RFC 9207)', async () => {
    const registered = web.RS256;
    const state = oauth.generateRandomState();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      client_id: registered.client.client_id,
      redirect_uri: REDIRECT_URI,
      response_type: 'code',
      scope: WEB_SCOPES,
      state,
      code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()),
      code_challenge_method: 'S256',
      prompt: 'consent',
    }).toString();
    const outcome = await browser.visit(url.href, { email: user.email, password }, 'deny');
    expect(() => oauth.validateAuthResponse(as, registered.client, outcome.redirect!, state)).toThrow(
      expect.objectContaining({ code: oauth.AUTHORIZATION_RESPONSE_ERROR, error: 'access_denied' }),
    );
  });

  it('refreshes with rotation, introspects and revokes (RFC 6749 §6, RFC 7662, RFC 7009)', async () => {
    const registered = web.RS256;
    const auth = oauth.ClientSecretBasic(registered.secret);
    const { tokens: first } = await signIn(registered);

    const refreshed = await oauth.processRefreshTokenResponse(as, registered.client, await oauth.refreshTokenGrantRequest(as, registered.client, auth, first.refresh_token!, http));
    expect(refreshed.refresh_token).toEqual(expect.any(String));
    expect(refreshed.refresh_token).not.toBe(first.refresh_token);
    expect(refreshed.scope).toBe(WEB_SCOPES);
    // OpenID Connect Core §12.2: same issuer, subject and audience; auth_time still the original sign-in's.
    const original = oauth.getValidatedIdTokenClaims(first)!;
    expect(oauth.getValidatedIdTokenClaims(refreshed)).toMatchObject({ iss: issuer, aud: registered.client.client_id, sub: user.id, auth_time: original.auth_time });

    // Introspection with each method introspection_endpoint_auth_methods_supported lists, by turns.
    expect(as.introspection_endpoint_auth_methods_supported).toEqual(['client_secret_basic', 'client_secret_post']);
    let turn = 0;
    const introspect = async (token: string, hint?: string) => {
      const method = turn++ % 2 === 0 ? auth : oauth.ClientSecretPost(registered.secret);
      const response = await oauth.introspectionRequest(as, registered.client, method, token, { ...http, ...(hint ? { additionalParameters: { token_type_hint: hint } } : {}) });
      return oauth.processIntrospectionResponse(as, registered.client, response);
    };
    expect(await introspect(refreshed.access_token)).toMatchObject({ active: true, client_id: registered.client.client_id, sub: user.id, scope: WEB_SCOPES, token_type: 'Bearer', iss: issuer });
    const refreshDescribed = await introspect(refreshed.refresh_token!, 'refresh_token');
    expect(refreshDescribed).toMatchObject({ active: true, client_id: registered.client.client_id, sub: user.id });
    // A refresh token has none of the access token types token_type names (RFC 7662 §2.2).
    expect(refreshDescribed).not.toHaveProperty('token_type');
    // The rotated-out refresh token is no longer active.
    expect(await introspect(first.refresh_token!, 'refresh_token')).toEqual({ active: false });

    await oauth.processRevocationResponse(await oauth.revocationRequest(as, registered.client, auth, refreshed.access_token, http));
    expect(await introspect(refreshed.access_token)).toEqual({ active: false });
    // RFC 6750 §3.1: both the API and userinfo refuse it with an invalid_token challenge.
    const refused = { code: oauth.WWW_AUTHENTICATE_CHALLENGE, cause: [{ scheme: 'bearer', parameters: expect.objectContaining({ error: 'invalid_token' }) }] };
    await expect(api(refreshed.access_token, '/v1/authorization')).rejects.toMatchObject({ ...refused, response: { status: 401 } });
    const userinfo = await oauth.userInfoRequest(as, registered.client, refreshed.access_token, http);
    await expect(oauth.processUserInfoResponse(as, registered.client, user.id, userinfo)).rejects.toMatchObject({ ...refused, response: { status: 401 } });

    await oauth.processRevocationResponse(await oauth.revocationRequest(as, registered.client, auth, refreshed.refresh_token!, { ...http, additionalParameters: { token_type_hint: 'refresh_token' } }));
    expect(await introspect(refreshed.refresh_token!, 'refresh_token')).toEqual({ active: false });
    await expect(
      oauth.processRefreshTokenResponse(as, registered.client, await oauth.refreshTokenGrantRequest(as, registered.client, auth, refreshed.refresh_token!, http)),
    ).rejects.toMatchObject({ code: oauth.RESPONSE_BODY_ERROR, error: 'invalid_grant', status: 400 });
  });

  it('issues a service its own token with client credentials (client_secret_post)', async () => {
    const response = await oauth.clientCredentialsGrantRequest(as, service.client, oauth.ClientSecretPost(service.secret), { scope: 'read:posts' }, http);
    const tokens = await oauth.processClientCredentialsResponse(as, service.client, response);
    expect({ token_type: tokens.token_type, scope: tokens.scope, refresh: tokens.refresh_token, id: tokens.id_token }).toEqual({ token_type: 'bearer', scope: 'read:posts', refresh: undefined, id: undefined });
    const posts = await api(tokens.access_token, '/v1/posts');
    expect(posts.status).toBe(200);
    const principal = await (await api(tokens.access_token, '/v1/authorization')).json();
    expect(principal.principal).toMatchObject({ type: 'client', clientId: service.client.client_id, role: 'member' });
  });

  it('connects a device: authorization, the user approves on the pages, the device polls for its tokens (RFC 8628)', async () => {
    const auth = oauth.None();
    const started = await oauth.processDeviceAuthorizationResponse(
      as,
      device.client,
      await oauth.deviceAuthorizationRequest(as, device.client, auth, { scope: 'openid offline_access read:posts' }, http),
    );
    expect(started).toMatchObject({ verification_uri: `${issuer}/oauth/device`, expires_in: expect.any(Number), interval: 5 });
    expect(started.verification_uri_complete).toBe(`${issuer}/oauth/device?user_code=${started.user_code}`);

    const poll = async () => oauth.processDeviceCodeResponse(as, device.client, await oauth.deviceCodeGrantRequest(as, device.client, auth, started.device_code, http));
    await expect(poll()).rejects.toMatchObject({ code: oauth.RESPONSE_BODY_ERROR, error: 'authorization_pending', status: 400 });

    const approval = await browser.visit(started.verification_uri_complete!, { email: user.email, password });
    expect({ status: approval.page?.status, connected: approval.page?.body.includes('Device connected') }).toEqual({ status: 200, connected: true });

    // A device waits `interval` seconds between polls (§3.5); slow_down would add five.
    let interval = started.interval!;
    let tokens: oauth.TokenEndpointResponse | undefined;
    while (tokens === undefined) {
      await new Promise((resolve) => setTimeout(resolve, interval * 1000));
      try {
        tokens = await poll();
      } catch (error) {
        if (!(error instanceof oauth.ResponseBodyError) || !['authorization_pending', 'slow_down'].includes(error.error)) throw error;
        if (error.error === 'slow_down') interval += 5;
      }
    }
    expect({ scope: tokens.scope, refresh: typeof tokens.refresh_token }).toEqual({ scope: 'openid offline_access read:posts', refresh: 'string' });
    expect(oauth.getValidatedIdTokenClaims(tokens)).toMatchObject({ iss: issuer, aud: device.client.client_id, sub: user.id });
    const userinfo = await oauth.processUserInfoResponse(as, device.client, user.id, await oauth.userInfoRequest(as, device.client, tokens.access_token, http));
    expect(userinfo).toEqual({ sub: user.id });
    // The code is redeemed once.
    await expect(poll()).rejects.toMatchObject({ code: oauth.RESPONSE_BODY_ERROR, error: 'invalid_grant' });

    // A public client revokes with its client_id alone (revocation_endpoint_auth_methods_supported: none).
    expect(as.revocation_endpoint_auth_methods_supported).toContain('none');
    await oauth.processRevocationResponse(await oauth.revocationRequest(as, device.client, auth, tokens.refresh_token!, http));
    await expect(
      oauth.processRefreshTokenResponse(as, device.client, await oauth.refreshTokenGrantRequest(as, device.client, auth, tokens.refresh_token!, http)),
    ).rejects.toMatchObject({ code: oauth.RESPONSE_BODY_ERROR, error: 'invalid_grant' });
    await expect(api(tokens.access_token, '/v1/authorization')).rejects.toMatchObject({ code: oauth.WWW_AUTHENTICATE_CHALLENGE });
  }, 30_000);
});
