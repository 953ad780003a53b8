/**
 * The published contract (GET /v1/rest) and the two discovery documents advertise only what works: every
 * endpoint they name answers (neither 404 nor 405), every grant type, response type and PKCE method they
 * list is served, every OpenAPI flow runs end to end through its own URLs, and the scope catalogue is the
 * one the server grants from. A value added to any of them without the server behind it fails here.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEVICE_CODE } from '../../src/oauth/device/device-authorization.js';
import { generateSecret } from '../../src/oauth/secrets.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { SignInBrowser, throughInject } from '../helpers/sign-in-browser.js';
import { createClient, type TestClient } from './fixtures.js';

const REDIRECT_URI = 'https://client.example.test/callback';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const DISCOVERY = ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'];
const NO_LIMITS = { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' };

/** How a client would first call each endpoint the metadata can name; a member missing here fails the test. */
const PLAUSIBLE_METHOD: Readonly<Record<string, 'GET' | 'POST'>> = {
  authorization_endpoint: 'GET',
  token_endpoint: 'POST',
  userinfo_endpoint: 'GET',
  jwks_uri: 'GET',
  device_authorization_endpoint: 'POST',
  revocation_endpoint: 'POST',
  introspection_endpoint: 'POST',
  end_session_endpoint: 'GET',
  registration_endpoint: 'POST',
  pushed_authorization_request_endpoint: 'POST',
  backchannel_authentication_endpoint: 'POST',
};

/** The OpenAPI flow objects and the grant each stands for (OpenAPI 3.1 §4.8.29). */
const FLOW_GRANTS: Readonly<Record<string, string>> = {
  authorizationCode: 'authorization_code',
  clientCredentials: 'client_credentials',
  implicit: 'implicit',
  password: 'password',
};

type Metadata = Record<string, unknown> & { issuer: string; scopes_supported: string[]; grant_types_supported: string[] };
interface Flow {
  authorizationUrl?: string;
  tokenUrl?: string;
  refreshUrl?: string;
  scopes: Record<string, string>;
}

describe.each(DATABASE_KINDS)('the contract and the discovery documents advertise only what works, on %s', (kind) => {
  let t: TestApp;
  let metadata: Metadata;
  let flows: Record<string, Flow>;
  let user: TestUser;
  let password: string;
  /** One browser for the whole suite: the user signs in once and stays signed in, as people do. */
  let browser: SignInBrowser;

  beforeAll(async () => {
    t = await startTestApp(kind, NO_LIMITS);
    const documents = await Promise.all(DISCOVERY.map(async (url) => (await t.request({ url })).json() as Metadata));
    expect(documents[1]).toEqual(documents[0]);
    metadata = documents[0]!;
    const spec = await t.request({ url: '/v1/rest' });
    expect(spec.statusCode).toBe(200);
    flows = spec.json().components.securitySchemes.oauth2.flows;
    user = await t.createUser('member');
    password = await user.password();
    browser = new SignInBrowser(throughInject(t.app.fastify), metadata.issuer);
  });
  afterAll(async () => {
    await t?.close();
  });

  /** A path on this server for an advertised URL: absolute under the issuer, or relative (the spec's server is `/`). */
  function onServer(url: string): string {
    const resolved = new URL(url, `${metadata.issuer}/`);
    expect(resolved.origin).toBe(new URL(metadata.issuer).origin);
    return resolved.pathname + resolved.search;
  }

  function basic(client: TestClient): string {
    return `Basic ${Buffer.from(`${client.client.clientId}:${client.secret}`).toString('base64')}`;
  }

  async function post(url: string, params: Record<string, string>, authorization?: string) {
    const res = await t.app.fastify.inject({
      method: 'POST',
      url: onServer(url),
      headers: { ...FORM, ...(authorization === undefined ? {} : { authorization }) },
      payload: new URLSearchParams(params).toString(),
    });
    return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
  }

  /** A confidential client registered for the given grants and scopes (consent is asked: not first-party). */
  function register(grantTypes: string[], scopes: string[], role: 'member' | null = null): Promise<TestClient> {
    return createClient(t.app.db, { grantTypes, scopes, role, redirectUris: grantTypes.includes('authorization_code') ? [REDIRECT_URI] : [] });
  }

  /** The user at the authorization URL, through login and consent; the URL the browser is sent back to. */
  async function authorize(authorizationUrl: string, params: Record<string, string>): Promise<URL> {
    const url = `${onServer(authorizationUrl)}?${new URLSearchParams(params)}`;
    const outcome = await browser.visit(url, { email: user.email, password });
    expect(outcome.page?.body).toBeUndefined();
    return outcome.redirect!;
  }

  function pkce(): { verifier: string; challenge: string } {
    const verifier = generateSecret();
    return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
  }

  it('names every endpoint under the issuer, and each answers the method a client would use (no 404, no 405)', async () => {
    const named = Object.keys(metadata).filter((member) => member.endsWith('_endpoint') || member === 'jwks_uri');
    expect(named.length).toBeGreaterThanOrEqual(8);
    for (const member of named) {
      const method = PLAUSIBLE_METHOD[member];
      expect(method, `${member}: no plausible method known`).toBeDefined();
      const res = await t.app.fastify.inject({ method: method!, url: onServer(metadata[member] as string), ...(method === 'POST' ? { headers: FORM, payload: '' } : {}) });
      expect({ member, status: res.statusCode, answered: ![404, 405].includes(res.statusCode) && res.statusCode < 500 }).toEqual({ member, status: res.statusCode, answered: true });
    }
  });

  it('serves every grant_types_supported value to a client registered for it, and refuses one it does not list', async () => {
    const client = await register(metadata.grant_types_supported, ['read:posts', 'offline_access'], metadata.grant_types_supported.includes('client_credentials') ? 'member' : null);
    for (const grantType of metadata.grant_types_supported) {
      // The grant runs: client_credentials issues; the others ask for what they redeem (code, refresh_token, device_code).
      const res = await post(metadata.token_endpoint as string, { grant_type: grantType }, basic(client));
      expect({ grantType, status: res.status, error: res.body.error }).toEqual(
        grantType === 'client_credentials' ? { grantType, status: 200, error: undefined } : { grantType, status: 400, error: 'invalid_request' },
      );
    }
    expect(metadata.grant_types_supported).not.toContain('password');
    expect(await post(metadata.token_endpoint as string, { grant_type: 'password', username: user.email, password }, basic(client))).toMatchObject({
      status: 400,
      body: { error: 'unsupported_grant_type' },
    });
  });

  it('lists the password grant, and serves it, once OAUTH_PASSWORD_GRANT=enabled', async () => {
    const enabled = await startTestApp(kind, { ...NO_LIMITS, OAUTH_PASSWORD_GRANT: 'enabled' });
    try {
      const listed = (await enabled.request({ url: DISCOVERY[0]! })).json() as Metadata;
      expect(listed.grant_types_supported).toEqual([...metadata.grant_types_supported, 'password']);
      const legacy = await createClient(enabled.app.db, { grantTypes: ['password'], scopes: ['read:posts'], role: null, legacy: true });
      const member = await enabled.createUser('member');
      const res = await enabled.app.fastify.inject({
        method: 'POST',
        url: onServer(listed.token_endpoint as string),
        headers: { ...FORM, authorization: basic(legacy) },
        payload: new URLSearchParams({ grant_type: 'password', username: member.email, password: await member.password(), scope: 'read:posts' }).toString(),
      });
      expect({ status: res.statusCode, scope: res.json().scope }).toEqual({ status: 200, scope: 'read:posts' });
    } finally {
      await enabled.close();
    }
  });

  it('answers every response_types_supported value with a code, and refuses the others with unsupported_response_type', async () => {
    const client = await register(['authorization_code'], ['read:posts']);
    const request = (responseType: string) => ({ response_type: responseType, client_id: client.client.clientId, redirect_uri: REDIRECT_URI, scope: 'read:posts', state: 'xyz', code_challenge: pkce().challenge, code_challenge_method: 'S256' });
    expect(metadata.response_types_supported).toEqual(['code']);
    for (const responseType of metadata.response_types_supported as string[]) {
      const back = await authorize(metadata.authorization_endpoint as string, request(responseType));
      expect({ code: back.searchParams.has('code'), state: back.searchParams.get('state'), iss: back.searchParams.get('iss') }).toEqual({ code: true, state: 'xyz', iss: metadata.issuer });
    }
    for (const responseType of ['token', 'id_token', 'code id_token', 'code token']) {
      const back = await authorize(metadata.authorization_endpoint as string, request(responseType));
      expect({ responseType, error: back.searchParams.get('error') }).toEqual({ responseType, error: 'unsupported_response_type' });
    }
    expect(metadata.response_modes_supported).toEqual(['query']);
    for (const responseMode of ['query', 'fragment', 'form_post']) {
      const back = await authorize(metadata.authorization_endpoint as string, { ...request('code'), response_mode: responseMode });
      expect({ responseMode, code: back.searchParams.has('code'), error: back.searchParams.get('error') }).toEqual(
        responseMode === 'query' ? { responseMode, code: true, error: null } : { responseMode, code: false, error: 'invalid_request' },
      );
    }
  });

  it('honours every prompt_values_supported value (OpenID Connect Core §3.1.2.1)', async () => {
    const client = await register(['authorization_code'], ['read:posts']);
    const visited: string[] = [];
    const send = throughInject(t.app.fastify);
    const recording = new SignInBrowser(async (request) => {
      visited.push(`${request.method} ${request.path.split('?')[0]}`);
      return send(request);
    }, metadata.issuer);
    const at = async (prompt?: string) => {
      visited.length = 0;
      const params = { response_type: 'code', client_id: client.client.clientId, redirect_uri: REDIRECT_URI, scope: 'read:posts', state: 'xyz', code_challenge: pkce().challenge, code_challenge_method: 'S256', ...(prompt ? { prompt } : {}) };
      const outcome = await recording.visit(`${onServer(metadata.authorization_endpoint as string)}?${new URLSearchParams(params)}`, { email: user.email, password });
      const back = outcome.redirect!;
      return { code: back.searchParams.has('code'), error: back.searchParams.get('error'), iss: back.searchParams.get('iss'), pages: visited.filter((step) => step.startsWith('POST')) };
    };
    expect(metadata.prompt_values_supported).toEqual(['none', 'login', 'consent']);
    expect(await at('none')).toEqual({ code: false, error: 'login_required', iss: metadata.issuer, pages: [] });
    expect(await at()).toEqual({ code: true, error: null, iss: metadata.issuer, pages: ['POST /oauth/login', 'POST /oauth/consent'] });
    // Signed in, consent remembered: none and no prompt need no page; login and consent ask again.
    expect(await at('none')).toEqual({ code: true, error: null, iss: metadata.issuer, pages: [] });
    expect(await at()).toEqual({ code: true, error: null, iss: metadata.issuer, pages: [] });
    expect(await at('login')).toEqual({ code: true, error: null, iss: metadata.issuer, pages: ['POST /oauth/login'] });
    expect(await at('consent')).toEqual({ code: true, error: null, iss: metadata.issuer, pages: ['POST /oauth/consent'] });
  });

  it('checks every code_challenge_methods_supported value at the token endpoint, and refuses plain', async () => {
    const client = await register(['authorization_code'], ['read:posts']);
    const base = { response_type: 'code', client_id: client.client.clientId, redirect_uri: REDIRECT_URI, scope: 'read:posts', state: 'xyz' };
    expect(metadata.code_challenge_methods_supported).toEqual(['S256']);
    for (const method of metadata.code_challenge_methods_supported as string[]) {
      for (const verifierMatches of [false, true]) {
        const { verifier, challenge } = pkce();
        const back = await authorize(metadata.authorization_endpoint as string, { ...base, code_challenge: challenge, code_challenge_method: method });
        const code = back.searchParams.get('code')!;
        const res = await post(metadata.token_endpoint as string, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifierMatches ? verifier : pkce().verifier }, basic(client));
        expect({ method, verifierMatches, status: res.status, error: res.body.error }).toEqual({ method, verifierMatches, status: verifierMatches ? 200 : 400, error: verifierMatches ? undefined : 'invalid_grant' });
      }
    }
    const { verifier } = pkce();
    const plain = await authorize(metadata.authorization_endpoint as string, { ...base, code_challenge: verifier, code_challenge_method: 'plain' });
    expect(plain.searchParams.get('error')).toBe('invalid_request');
  });

  it('publishes only the flows the server serves by default: authorizationCode and clientCredentials, no implicit or password', () => {
    expect(Object.keys(flows).sort()).toEqual(['authorizationCode', 'clientCredentials']);
    for (const name of Object.keys(flows)) expect(metadata.grant_types_supported).toContain(FLOW_GRANTS[name]);
  });

  it('runs the authorizationCode flow through its authorizationUrl, tokenUrl and refreshUrl', async () => {
    const flow = flows.authorizationCode!;
    expect([onServer(flow.authorizationUrl!), onServer(flow.tokenUrl!), onServer(flow.refreshUrl!)]).toEqual([
      onServer(metadata.authorization_endpoint as string),
      onServer(metadata.token_endpoint as string),
      onServer(metadata.token_endpoint as string),
    ]);
    const scopes = Object.keys(flow.scopes);
    const client = await register(['authorization_code', 'refresh_token'], scopes);
    const { verifier, challenge } = pkce();
    const back = await authorize(flow.authorizationUrl!, {
      response_type: 'code', client_id: client.client.clientId, redirect_uri: REDIRECT_URI, scope: scopes.join(' '), state: 'xyz', nonce: 'n-0S6', code_challenge: challenge, code_challenge_method: 'S256',
    });
    expect(back.searchParams.get('iss')).toBe(metadata.issuer);
    const issued = await post(flow.tokenUrl!, { grant_type: 'authorization_code', code: back.searchParams.get('code')!, redirect_uri: REDIRECT_URI, code_verifier: verifier }, basic(client));
    expect({ status: issued.status, scope: issued.body.scope, refresh: typeof issued.body.refresh_token, id: typeof issued.body.id_token }).toEqual({ status: 200, scope: scopes.join(' '), refresh: 'string', id: 'string' });
    // Every scope of the flow is one the server grants (the user allowed them all on the consent page).
    const refreshed = await post(flow.refreshUrl!, { grant_type: 'refresh_token', refresh_token: issued.body.refresh_token }, basic(client));
    expect({ status: refreshed.status, scope: refreshed.body.scope, rotated: refreshed.body.refresh_token !== issued.body.refresh_token }).toEqual({ status: 200, scope: scopes.join(' '), rotated: true });
  });

  it('runs the clientCredentials flow through its tokenUrl for each of its scopes; its refreshUrl is the token endpoint', async () => {
    const flow = flows.clientCredentials!;
    expect([onServer(flow.tokenUrl!), onServer(flow.refreshUrl!)]).toEqual([onServer(metadata.token_endpoint as string), onServer(metadata.token_endpoint as string)]);
    const scopes = Object.keys(flow.scopes);
    const client = await register(['client_credentials'], scopes, 'member');
    for (const scope of scopes) {
      const res = await post(flow.tokenUrl!, { grant_type: 'client_credentials', scope }, basic(client));
      // RFC 6749 §4.4.3: no refresh token for client credentials; the client asks again.
      expect({ scope, status: res.status, granted: res.body.scope, refresh: res.body.refresh_token }).toEqual({ scope, status: 200, granted: scope, refresh: undefined });
    }
  });

  it('runs the device flow through device_authorization_endpoint, the pages and the token endpoint', async () => {
    const client = await register([DEVICE_CODE], ['read:posts']);
    const started = await post(metadata.device_authorization_endpoint as string, { scope: 'read:posts' }, basic(client));
    expect(started.status).toBe(200);
    const poll = () => post(metadata.token_endpoint as string, { grant_type: DEVICE_CODE, device_code: started.body.device_code }, basic(client));
    expect((await poll()).body.error).toBe('authorization_pending');
    const approval = await browser.visit(started.body.verification_uri_complete, { email: user.email, password });
    expect(approval.page?.status).toBe(200);
    const issued = await poll();
    expect({ status: issued.status, scope: issued.body.scope }).toEqual({ status: 200, scope: 'read:posts' });
  });

  it('has one scope catalogue: the published flows, the Scope schema and scopes_supported list the same scopes', async () => {
    const spec = (await t.request({ url: '/v1/rest' })).json();
    const catalogue = new Set(Object.values(flows).flatMap((flow) => Object.keys(flow.scopes)));
    expect([...catalogue].sort()).toEqual([...metadata.scopes_supported].sort());
    expect([...spec.components.schemas.Scope.enum].sort()).toEqual([...metadata.scopes_supported].sort());
  });
});
