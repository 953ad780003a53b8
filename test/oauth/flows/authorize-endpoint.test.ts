import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UserRecord } from '../../../src/storage/users.js';
import { cookieJar } from '../../../src/oauth/browser/cookies.js';
import { CsrfTokens } from '../../../src/oauth/browser/csrf.js';
import { digestSecret } from '../../../src/oauth/secrets.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import type { TestClient } from '../fixtures.js';
import { Browser, emailField, expectErrorPage, expectPage, hiddenInputs } from './browser.js';
import {
  answerConsent,
  authorizeUrl,
  codeOf,
  countRows,
  createNativeClient,
  createUser,
  createWebClient,
  expectErrorRedirect,
  obtainCode,
  openFlowApp,
  PASSWORD,
  signIn,
  type FlowApp,
} from './flow.js';

const INVALID_REDIRECT = ['Invalid redirect', 'The redirect_uri does not match any address registered for this application.'] as const;

describe.each(DATABASE_KINDS)('GET /oauth/authorize on %s', (kind) => {
  let t: FlowApp;
  let user: UserRecord;
  let web: TestClient;
  let native: TestClient;
  let nativeV6: TestClient;
  /** Signed in, with no consent given to `web`. */
  let signedIn: Browser;

  beforeAll(async () => {
    t = await openFlowApp(kind);
    user = await createUser(t.db);
    web = await createWebClient(t.db);
    native = await createNativeClient(t.db);
    nativeV6 = await createNativeClient(t.db, { redirectUris: ['http://[::1]:8080/cb'] });
    signedIn = new Browser(t.oauth.app);
    const loginPage = await signedIn.visit(authorizeUrl(web, { extra: { prompt: 'login' } }));
    const consentPage = await signIn(signedIn, loginPage, user.email);
    expectPage(consentPage, 'consent');
  });
  afterAll(async () => {
    await t.close();
  });

  /** An anonymous browser's visit, not followed. */
  function visit(url: string) {
    return new Browser(t.oauth.app).get(url);
  }

  describe('shows an error page, never a redirect, when the client or redirect_uri cannot be trusted', () => {
    it('for an unknown client_id', async () => {
      const reply = await visit(authorizeUrl({ ...web, client: { ...web.client, clientId: 'no-such-client' } }));
      expectErrorPage(reply, 400, 'Unknown application', 'The application that sent you here is not registered with this server.');
      expect(reply.headers['set-cookie']).toBeUndefined();
    });

    it('for a missing client_id', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { client_id: undefined } }));
      expectErrorPage(reply, 400, 'Invalid request', 'The request names no client (client_id is missing).');
    });

    it('for a repeated client_id', async () => {
      const reply = await visit(`${authorizeUrl(web)}&client_id=${encodeURIComponent(web.client.clientId)}`);
      expectErrorPage(reply, 400, 'Invalid request', 'The client_id parameter is repeated.');
    });

    it('for a missing redirect_uri, even with one registered', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { redirect_uri: undefined } }));
      expectErrorPage(reply, 400, 'Invalid request', 'The request has no redirect_uri.');
    });

    it.each([
      ['a trailing slash', 'https://app.example/cb/'],
      ['another case in the path', 'https://app.example/CB'],
      ['another case in the host', 'https://APP.example/cb'],
      ['an extra query', 'https://app.example/cb?next=/admin'],
      ['another port', 'https://app.example:8443/cb'],
      ['a subdomain', 'https://evil.app.example/cb'],
      ['plain http', 'http://app.example/cb'],
      ['a fragment', 'https://app.example/cb#x'],
      ['userinfo', 'https://app.example@evil.example/cb'],
    ])('for a redirect_uri with %s', async (_what, redirectUri) => {
      const codes = await countRows(t.db, 'authorizationCodes');
      const reply = await visit(authorizeUrl(web, { redirectUri }));
      expectErrorPage(reply, 400, ...INVALID_REDIRECT);
      expect(reply.headers['set-cookie']).toBeUndefined();
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
    });

    it.each([
      ['another path', 'http://127.0.0.1:9000/other'],
      ['localhost by name', 'http://localhost:8080/cb'],
      ['https', 'https://127.0.0.1:8080/cb'],
      ['a port out of range', 'http://127.0.0.1:70000/cb'],
    ])('for a loopback redirect_uri with %s', async (_what, redirectUri) => {
      expectErrorPage(await visit(authorizeUrl(native, { redirectUri })), 400, ...INVALID_REDIRECT);
    });

    it('for a redirect_uri of another client', async () => {
      expectErrorPage(await visit(authorizeUrl(web, { redirectUri: native.client.redirectUris[0] })), 400, ...INVALID_REDIRECT);
    });
  });

  describe('lets a loopback redirect_uri use any port (RFC 8252 §7.3)', () => {
    it.each([
      ['127.0.0.1', () => native, 'http://127.0.0.1:53127/cb'],
      ['127.0.0.1 without a port', () => native, 'http://127.0.0.1/cb'],
      ['[::1]', () => nativeV6, 'http://[::1]:61000/cb'],
    ])('on %s, and sends the code to that port', async (_what, client, redirectUri) => {
      const { reply } = await obtainCode(t, signedIn, client(), user, { redirectUri });
      expect(String(reply.headers.location).startsWith(`${redirectUri}?code=`)).toBe(true);
    });
  });

  describe('redirects other errors with error, state and iss (RFC 9207)', () => {
    it('refuses response_type=token (implicit) with unsupported_response_type', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { response_type: 'token' } }));
      expectErrorRedirect(reply, t.config.issuer, 'unsupported_response_type', 'Only response_type=code is supported.');
    });

    it('refuses response_type=code id_token', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { response_type: 'code id_token' } }));
      expectErrorRedirect(reply, t.config.issuer, 'unsupported_response_type', 'Only response_type=code is supported.');
    });

    it('refuses a missing response_type', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { response_type: undefined } }));
      expectErrorRedirect(reply, t.config.issuer, 'invalid_request', 'response_type is required.');
    });

    it('refuses a request without state', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { state: undefined } }));
      expectErrorRedirect(reply, t.config.issuer, 'invalid_request', 'state is required.', null);
    });

    it('refuses a public client without code_challenge', async () => {
      const reply = await visit(authorizeUrl(native, { pkce: null }));
      expectErrorRedirect(reply, t.config.issuer, 'invalid_request', 'A public client must use PKCE (code_challenge with S256).', 'state-123', native.client.redirectUris[0]);
    });

    it('refuses code_challenge_method=plain', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { code_challenge_method: 'plain' } }));
      expectErrorRedirect(reply, t.config.issuer, 'invalid_request', 'code_challenge_method must be S256.');
    });

    it('refuses a code_challenge without a method (it would mean plain)', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { code_challenge_method: undefined } }));
      expectErrorRedirect(reply, t.config.issuer, 'invalid_request', 'code_challenge_method must be S256.');
    });

    it('refuses a malformed code_challenge', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { code_challenge: 'too-short' } }));
      expectErrorRedirect(reply, t.config.issuer, 'invalid_request', 'The code_challenge is malformed.');
    });

    it('refuses a method without a challenge', async () => {
      const reply = await visit(authorizeUrl(web, { pkce: null, extra: { code_challenge_method: 'S256' } }));
      expectErrorRedirect(reply, t.config.issuer, 'invalid_request', 'code_challenge_method without code_challenge.');
    });

    it('refuses a scope the client may not request, and records the refusal', async () => {
      const reply = await visit(authorizeUrl(web, { scope: 'read:posts read:users' }));
      expectErrorRedirect(reply, t.config.issuer, 'invalid_scope', 'The application asked for access it is not registered for.');
      expect(t.oauth.decisions.at(-1)).toEqual({
        requestId: expect.any(String),
        sourceAddress: '127.0.0.1',
        interface: 'oauth',
        operation: 'authorize',
        subject: null,
        clientId: web.client.clientId,
        resourceType: null,
        resourceId: null,
        decision: 'deny',
        reason: 'scope',
      });
    });

    it('never echoes a refused scope in the redirect, where the application may show the text to its user', async () => {
      const phishing = 'openid Your-session-expired.Re-enter-your-password-at:https://evil.example/login';
      const reply = await visit(authorizeUrl(web, { scope: phishing }));
      expectErrorRedirect(reply, t.config.issuer, 'invalid_scope', 'The application asked for access it is not registered for.');
      expect(String(reply.headers.location)).not.toContain('evil.example');
      // The token and device endpoints still name the refused scopes: only the authenticated client reads them
      // (refresh-token.test.ts, device-flow.test.ts).
    });

    it('refuses a missing scope and a malformed one', async () => {
      expectErrorRedirect(await visit(authorizeUrl(web, { extra: { scope: undefined } })), t.config.issuer, 'invalid_scope', 'scope is required: request the scopes the application needs.');
      expectErrorRedirect(await visit(authorizeUrl(web, { scope: 'read:posts  write:posts' })), t.config.issuer, 'invalid_scope', 'The scope parameter is malformed.');
    });

    it('refuses a repeated parameter', async () => {
      const reply = await visit(`${authorizeUrl(web)}&scope=openid`);
      expectErrorRedirect(reply, t.config.issuer, 'invalid_request', 'The scope parameter is repeated.');
    });

    it('refuses a repeated state without echoing either value', async () => {
      const reply = await visit(`${authorizeUrl(web)}&state=other`);
      expectErrorRedirect(reply, t.config.issuer, 'invalid_request', 'The state parameter is repeated.', null);
    });

    it('refuses request objects with request_not_supported and request_uri_not_supported', async () => {
      const withRequest = await visit(authorizeUrl(web, { extra: { request: 'eyJhbGciOiJub25lIn0.e30.' } }));
      expectErrorRedirect(withRequest, t.config.issuer, 'request_not_supported', 'Request objects are not supported.');
      const withRequestUri = await visit(authorizeUrl(web, { extra: { request_uri: 'urn:ietf:params:oauth:request_uri:abc' } }));
      expectErrorRedirect(withRequestUri, t.config.issuer, 'request_uri_not_supported', 'request_uri is not supported.');
    });

    it('refuses a client not registered for the authorization code grant', async () => {
      const service = await createWebClient(t.db, { grantTypes: ['client_credentials'], role: 'member' });
      const reply = await visit(authorizeUrl(service));
      expectErrorRedirect(reply, t.config.issuer, 'unauthorized_client', 'The client may not use the authorization code grant.');
    });

    it('refuses response_mode other than query, an unknown prompt, prompt=none with another value and a malformed max_age', async () => {
      expectErrorRedirect(await visit(authorizeUrl(web, { extra: { response_mode: 'fragment' } })), t.config.issuer, 'invalid_request', 'Only response_mode=query is supported.');
      expectErrorRedirect(await visit(authorizeUrl(web, { extra: { prompt: 'select_account' } })), t.config.issuer, 'invalid_request', 'prompt must be none, login or consent.');
      expectErrorRedirect(await visit(authorizeUrl(web, { extra: { prompt: 'none login' } })), t.config.issuer, 'invalid_request', 'prompt=none cannot be combined with another value.');
      expectErrorRedirect(await visit(authorizeUrl(web, { extra: { max_age: '-1' } })), t.config.issuer, 'invalid_request', 'max_age must be a number of seconds.');
    });

    it('keeps the registered redirect_uri’s own query and appends to it', async () => {
      const withQuery = await createWebClient(t.db, { redirectUris: ['https://app.example/cb?tenant=7'] });
      const reply = await visit(authorizeUrl(withQuery, { extra: { response_type: 'token' } }));
      expect(reply.statusCode).toBe(303);
      const location = new URL(String(reply.headers.location));
      expect([...location.searchParams]).toEqual([
        ['tenant', '7'],
        ['error', 'unsupported_response_type'],
        ['error_description', 'Only response_type=code is supported.'],
        ['state', 'state-123'],
        ['iss', t.config.issuer],
      ]);
    });
  });

  describe('prompt, max_age and login_hint (OpenID Connect Core §3.1.2.1)', () => {
    it('answers prompt=none without a session with login_required', async () => {
      const reply = await visit(authorizeUrl(web, { extra: { prompt: 'none' } }));
      expectErrorRedirect(reply, t.config.issuer, 'login_required', 'The user is not signed in.');
    });

    it('answers prompt=none with a session but without consent with consent_required', async () => {
      const reply = await signedIn.get(authorizeUrl(web, { extra: { prompt: 'none' } }));
      expectErrorRedirect(reply, t.config.issuer, 'consent_required', 'The user has not allowed this access.');
    });

    it('answers prompt=none with a session and consent with a code, showing no page', async () => {
      const client = await createWebClient(t.db);
      await obtainCode(t, signedIn, client, user);
      const reply = await signedIn.get(authorizeUrl(client, { extra: { prompt: 'none' } }));
      codeOf(reply, t.config.issuer);
    });

    it('asks a signed-in user to sign in again with prompt=login, then goes on', async () => {
      const client = await createWebClient(t.db, { firstParty: true });
      const loginPage = await signedIn.visit(authorizeUrl(client, { extra: { prompt: 'login' } }));
      expectPage(loginPage, 'login');
      codeOf(await signIn(signedIn, loginPage, user.email), t.config.issuer);
    });

    it('asks a signed-in user to sign in again with max_age=0, however recent the sign-in', async () => {
      const browser = new Browser(t.oauth.app);
      const client = await createWebClient(t.db, { firstParty: true });
      await obtainCode(t, browser, client, user);
      // Within the same second as the sign-in: an elapsed time of 0 is not "greater than 0", yet max_age=0
      // means "sign in now" (OpenID Connect Core §3.1.2.1: equivalent to prompt=login).
      const loginPage = await browser.visit(authorizeUrl(client, { extra: { max_age: '0' } }));
      expectPage(loginPage, 'login');
      codeOf(await signIn(browser, loginPage, user.email), t.config.issuer);
    });

    it('cannot skip the sign-in prompt=login or max_age asks for by going to the consent page directly', async () => {
      const browser = new Browser(t.oauth.app);
      const client = await createWebClient(t.db);
      await obtainCode(t, browser, client, user);
      for (const extra of [{ prompt: 'login consent' }, { max_age: '0', prompt: 'consent' }]) {
        const loginPage = await browser.visit(authorizeUrl(client, { extra }));
        expectPage(loginPage, 'login');
        const { interaction } = hiddenInputs(loginPage.body);
        // The consent page sends the browser back to sign in, for its form as for its page.
        const consentPage = await browser.get(`/oauth/consent?interaction=${interaction}`);
        expect({ status: consentPage.statusCode, location: consentPage.headers.location }).toEqual({ status: 303, location: `/oauth/login?interaction=${interaction}` });
        // Even a form with a valid token (as the page would have given) is sent to sign in first.
        const jar = cookieJar(t.config.issuer);
        const csrf = new CsrfTokens(t.config.keyEncryptionSecret).issue(browser.cookies.get(jar.browser)!, `consent:${interaction}`);
        const forced = await browser.post('/oauth/consent', { interaction: interaction!, csrf_token: csrf, decision: 'allow', scope: 'read:posts' });
        expect({ status: forced.statusCode, location: forced.headers.location }).toEqual({ status: 303, location: `/oauth/login?interaction=${interaction}` });
        // Signing in then leads to the consent page, and on to a code.
        const consent = await signIn(browser, loginPage, user.email);
        expectPage(consent, 'consent');
        codeOf(await answerConsent(browser, consent), t.config.issuer);
      }
    });

    it('does not ask again when the sign-in is within max_age', async () => {
      const client = await createWebClient(t.db, { firstParty: true });
      codeOf(await signedIn.visit(authorizeUrl(client, { extra: { max_age: '3600' } })), t.config.issuer);
    });

    it('asks again once the sign-in is older than max_age', async () => {
      const browser = new Browser(t.oauth.app);
      const client = await createWebClient(t.db, { firstParty: true });
      await obtainCode(t, browser, client, user);
      await t.db.kysely.updateTable('loginSessions').set({ authTime: new Date(Date.now() - 120_000).toISOString() }).where('userId', '=', user.id).execute();
      expectPage(await browser.visit(authorizeUrl(client, { extra: { max_age: '60' } })), 'login');
    });

    it('pre-fills the email with login_hint, escaped', async () => {
      const browser = new Browser(t.oauth.app);
      const loginPage = await browser.visit(authorizeUrl(web, { extra: { login_hint: 'a"b<c>@example.com' } }));
      expectPage(loginPage, 'login');
      expect(emailField(loginPage.body)).toBe('a"b<c>@example.com');
      expect(loginPage.body).toContain('value="a&quot;b&lt;c&gt;@example.com"');
    });
  });

  describe('login_hint naming someone other than the signed-in user', () => {
    /** The user an authorization code was issued for. */
    async function codeUser(code: string): Promise<string> {
      const row = await t.db.kysely.selectFrom('authorizationCodes').select('userId').where('codeHash', '=', digestSecret(code)).executeTakeFirstOrThrow();
      return row.userId;
    }

    it('shows the login page filled in with the hint instead of answering with the session of another user', async () => {
      const alice = await createUser(t.db);
      const client = await createWebClient(t.db, { firstParty: true });
      const browser = new Browser(t.oauth.app);
      await obtainCode(t, browser, client, user);
      const hint = alice.email.toUpperCase();
      const loginPage = await browser.visit(authorizeUrl(client, { extra: { login_hint: hint } }));
      expectPage(loginPage, 'login');
      expect(emailField(loginPage.body)).toBe(hint);
      const code = codeOf(await signIn(browser, loginPage, alice.email), t.config.issuer);
      expect(await codeUser(code)).toBe(alice.id);
    });

    it('goes on with the session when the hint names its user, in any case', async () => {
      const client = await createWebClient(t.db, { firstParty: true });
      const browser = new Browser(t.oauth.app);
      await obtainCode(t, browser, client, user);
      const code = codeOf(await browser.visit(authorizeUrl(client, { extra: { login_hint: user.email.toUpperCase() } })), t.config.issuer);
      expect(await codeUser(code)).toBe(user.id);
    });

    it('lets the user sign in as themselves on that page after all: the sign-in of this interaction decides', async () => {
      const client = await createWebClient(t.db, { firstParty: true });
      const browser = new Browser(t.oauth.app);
      await obtainCode(t, browser, client, user);
      const loginPage = await browser.visit(authorizeUrl(client, { extra: { login_hint: 'someone-else@example.com' } }));
      expectPage(loginPage, 'login');
      const code = codeOf(await signIn(browser, loginPage, user.email), t.config.issuer);
      expect(await codeUser(code)).toBe(user.id);
    });

    it('answers prompt=none with login_required, issuing nothing', async () => {
      const client = await createWebClient(t.db, { firstParty: true });
      const browser = new Browser(t.oauth.app);
      await obtainCode(t, browser, client, user);
      const codes = await countRows(t.db, 'authorizationCodes');
      const reply = await browser.get(authorizeUrl(client, { extra: { prompt: 'none', login_hint: 'someone-else@example.com' } }));
      expectErrorRedirect(reply, t.config.issuer, 'login_required', 'The user named by login_hint is not signed in.');
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
    });
  });

  describe('page headers and cookies', () => {
    it('sends pages with a CSP that forbids framing and allows the form to end at the client', async () => {
      const loginPage = await new Browser(t.oauth.app).visit(authorizeUrl(web));
      expectPage(loginPage, 'login');
      expect(loginPage.headers['content-security-policy']).toMatch(/; form-action 'self' https:\/\/app\.example; frame-ancestors 'none'; /);
    });

    it('sends redirects with the same no-framing, no-referrer, no-store headers', async () => {
      const reply = await visit(authorizeUrl(web));
      expect(reply.statusCode).toBe(303);
      expect(reply.headers).toMatchObject({ 'x-frame-options': 'DENY', 'referrer-policy': 'no-referrer', 'cache-control': 'no-store' });
    });

    it('uses __Host- cookies with Secure over https', async () => {
      const browser = new Browser(t.oauth.app);
      await signIn(browser, await browser.visit(authorizeUrl(web)), user.email);
      expect(browser.setCookies).toEqual([
        expect.stringMatching(/^__Host-portcullis-browser=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Secure$/),
        expect.stringMatching(/^__Host-portcullis-session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Secure; Max-Age=43200$/),
        expect.stringMatching(/^__Host-portcullis-device=[A-Za-z0-9_-]{73}; Path=\/; HttpOnly; SameSite=Lax; Secure; Max-Age=7776000$/),
      ]);
    });

    it('uses unprefixed cookies without Secure when the issuer is plain http (development)', async () => {
      const plain = await openFlowApp(kind, { ISSUER: 'http://127.0.0.1:3000' });
      try {
        const client = await createWebClient(plain.db);
        const someone = await createUser(plain.db);
        const browser = new Browser(plain.oauth.app);
        const loginPage = await browser.visit(authorizeUrl(client));
        const consentPage = await browser.submit('/oauth/login', { ...hiddenInputs(loginPage.body), email: someone.email, password: PASSWORD });
        expectPage(consentPage, 'consent');
        expect(browser.setCookies).toEqual([
          expect.stringMatching(/^portcullis-browser=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax$/),
          expect.stringMatching(/^portcullis-session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=43200$/),
          expect.stringMatching(/^portcullis-device=[A-Za-z0-9_-]{73}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=7776000$/),
        ]);
      } finally {
        await plain.close();
      }
    });

    it('does not honour an unprefixed session cookie when the issuer is https (a sibling could plant it)', async () => {
      const browser = new Browser(t.oauth.app);
      for (const [name, value] of signedIn.cookies) browser.cookies.set(name.replace('__Host-', ''), value);
      const reply = await browser.get(authorizeUrl(web, { extra: { prompt: 'none' } }));
      expectErrorRedirect(reply, t.config.issuer, 'login_required', 'The user is not signed in.');
    });
  });
});
