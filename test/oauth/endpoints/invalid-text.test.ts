import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseParams } from '../../../src/oauth/endpoints/page-reply.js';
import { OAuthError } from '../../../src/oauth/oauth-error.js';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { createClient, type TestClient } from '../fixtures.js';
import { basic, form, FORM } from '../oauth-app.js';
import { Browser, expectErrorPage, hiddenInputs, pageHeading, type Reply } from '../flows/browser.js';
import { authorizeUrl, countRows, createUser, createWebClient, NO_STORE, openFlowApp, PASSWORD, REDIRECT_URI, type FlowApp } from '../flows/flow.js';

// A parameter with a NUL in it, or bytes that are not UTF-8 once percent-decoded, in a form body, a query or
// HTTP Basic credentials: refused as malformed before anything reads the database (PostgreSQL refuses a NUL
// in text, which answered 500), never acted on, never sent on to a redirect URI.

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const FORM_NUL = 'The form contains a NUL character or an unpaired surrogate.';
const FORM_NOT_UTF8 = 'The form is not valid UTF-8 once percent-decoded.';
const QUERY_NUL = 'The query contains a NUL character or an unpaired surrogate.';
const QUERY_NOT_UTF8 = 'The query is not valid UTF-8 once percent-decoded.';
const BASIC_CHALLENGE = 'Basic realm="portcullis"';
/** An unpaired surrogate (U+D800) as a browser would percent-encode its UTF-8-like bytes: not UTF-8. */
const SURROGATE = '%ED%A0%80';

describe('parseParams: the one reader of form bodies and queries', () => {
  function refusal(text: string, source: 'form' | 'query'): unknown {
    try {
      parseParams(text, source);
      return null;
    } catch (error) {
      expect(error).toBeInstanceOf(OAuthError);
      const { error: code, description, status } = error as OAuthError;
      return { code, description, status };
    }
  }

  it('reads valid UTF-8, characters outside the BMP and repeats included', () => {
    expect([...parseParams('state=caf%C3%A9+%F0%9F%98%80&scope=a&scope=b&empty=', 'query')]).toEqual([
      ['state', 'café 😀'],
      ['scope', 'a'],
      ['scope', 'b'],
      ['empty', ''],
    ]);
  });

  it('refuses a NUL in a name or a value, percent-encoded or raw', () => {
    for (const text of ['a=%00', '%00=a', 'a=x\u0000y', 'ok=1&a%00b=c']) {
      expect(refusal(text, 'form'), text).toEqual({ code: 'invalid_request', description: FORM_NUL, status: 400 });
      expect(refusal(text, 'query'), text).toEqual({ code: 'invalid_request', description: QUERY_NUL, status: 400 });
    }
  });

  it('refuses bytes that are not UTF-8 once percent-decoded, an encoded surrogate included, and a raw unpaired surrogate', () => {
    for (const text of [`a=${SURROGATE}`, 'a=%FF', 'a=\ud800', '%C3=x']) {
      expect(refusal(text, 'form'), text).toEqual({ code: 'invalid_request', description: FORM_NOT_UTF8, status: 400 });
      expect(refusal(text, 'query'), text).toEqual({ code: 'invalid_request', description: QUERY_NOT_UTF8, status: 400 });
    }
  });
});

describe.each(DATABASE_KINDS)('NUL and invalid UTF-8 in OAuth parameters on %s', (kind) => {
  let t: FlowApp;
  let service: TestClient;
  let web: TestClient;
  let user: UserRecord;

  beforeAll(async () => {
    t = await openFlowApp(kind);
    service = await createClient(t.db, { grantTypes: ['client_credentials', DEVICE_GRANT] });
    web = await createWebClient(t.db);
    user = await createUser(t.db);
  });
  afterAll(() => t.close());

  /** Rows and audit decisions a request could have added: none may appear. */
  async function stored() {
    const interactions = await t.db.kysely.selectFrom('interactions').select((eb) => eb.fn.countAll<string | number>().as('n')).executeTakeFirstOrThrow();
    const deviceCodes = await t.db.kysely.selectFrom('deviceCodes').select(['status']).execute();
    return {
      accessTokens: await countRows(t.db, 'accessTokens'),
      authorizationCodes: await countRows(t.db, 'authorizationCodes'),
      loginSessions: await countRows(t.db, 'loginSessions'),
      consents: await countRows(t.db, 'consents'),
      interactions: Number(interactions.n),
      deviceCodes: deviceCodes.map((row) => row.status).sort(),
      decisions: t.oauth.decisions.length,
    };
  }

  function expectOAuthError(reply: Reply, status: number, error: string, description: string): void {
    expect({ status: reply.statusCode, body: reply.json() }).toEqual({ status, body: { error, error_description: description } });
    expect(reply.headers).toMatchObject(NO_STORE);
    expect(reply.headers['content-type']).toBe('application/json; charset=utf-8');
  }

  describe('the JSON endpoints answer 400 invalid_request', () => {
    // The request each endpoint would take, with the client authenticated in the body where the reviewer's
    // reproduction put the NUL (client_id) and by HTTP Basic elsewhere.
    const requests: [string, string, string][] = [
      ['/oauth/token', 'grant_type=client_credentials&client_id=%00', FORM_NUL],
      ['/oauth/token', `grant_type=client_credentials&client_id=${SURROGATE}`, FORM_NOT_UTF8],
      ['/oauth/token', 'grant_type=client_credentials&scope=read%3Aposts%00', FORM_NUL],
      ['/oauth/token', 'grant_type=client_credentials&%00=x', FORM_NUL],
      ['/oauth/device_authorization', 'client_id=%00&scope=read%3Aposts', FORM_NUL],
      ['/oauth/revoke', 'client_id=%00&token=x', FORM_NUL],
      ['/oauth/revoke', 'token=%00', FORM_NUL],
      ['/oauth/introspect', 'token=%00', FORM_NUL],
      ['/oauth/introspect', `token=${SURROGATE}`, FORM_NOT_UTF8],
    ];

    it.each(requests)('POST %s with %s, storing nothing', async (url, payload, description) => {
      const before = await stored();
      const headers = payload.includes('client_id') ? FORM : { ...FORM, authorization: basic(service.client.clientId, service.secret) };
      expectOAuthError(await t.oauth.app.inject({ method: 'POST', url, headers, payload }), 400, 'invalid_request', description);
      expect(await stored()).toEqual(before);
    });
  });

  describe('HTTP Basic credentials with a NUL are malformed credentials: 401 invalid_client with the challenge', () => {
    // As Basic credentials that are not UTF-8 are answered (client-auth.ts): the client tried the header.
    const credentials: [string, string][] = [
      ['a percent-encoded NUL as the client_id', '%00:secret'],
      ['a raw NUL in the client_id', 'client\u0000:secret'],
      ['a percent-encoded NUL in the secret', 'SERVICE:secret%00'],
    ];

    it.each(['/oauth/token', '/oauth/revoke', '/oauth/introspect', '/oauth/device_authorization'])('at %s', async (url) => {
      const fields: Record<string, string> = url === '/oauth/token' ? { grant_type: 'client_credentials' } : url === '/oauth/device_authorization' ? { scope: 'read:posts' } : { token: 'x'.repeat(43) };
      for (const [what, pair] of credentials) {
        const before = await stored();
        const authorization = `Basic ${Buffer.from(pair.replace('SERVICE', service.client.clientId)).toString('base64')}`;
        const reply = await t.oauth.app.inject({ method: 'POST', url, headers: { ...FORM, authorization }, payload: form(fields) });
        expect(reply.headers['www-authenticate'], what).toBe(BASIC_CHALLENGE);
        expectOAuthError(reply, 401, 'invalid_client', 'The Basic credentials are malformed.');
        // A failed client authentication is audited as any is; with no client it could name, it names none.
        expect(t.oauth.decisions.slice(before.decisions)).toEqual([
          expect.objectContaining({ interface: 'oauth', subject: null, clientId: null, decision: 'deny', reason: 'authentication' }),
        ]);
        expect({ ...(await stored()), decisions: before.decisions }).toEqual(before);
      }
    });
  });

  describe('the pages answer with the 400 error page, never a redirect', () => {
    it.each([
      ['/oauth/authorize?client_id=%00&redirect_uri=x', QUERY_NUL],
      [`/oauth/authorize?client_id=${SURROGATE}&redirect_uri=x`, QUERY_NOT_UTF8],
      ['/oauth/logout?client_id=%00', QUERY_NUL],
      ['/oauth/login?interaction=%00', QUERY_NUL],
      ['/oauth/consent?interaction=%00', QUERY_NUL],
      ['/oauth/device?user_code=%00', QUERY_NUL],
      [`/oauth/device?user_code=${SURROGATE}`, QUERY_NOT_UTF8],
    ])('GET %s', async (url, description) => {
      const before = await stored();
      expectErrorPage(await new Browser(t.oauth.app).get(url), 400, 'Invalid request', description);
      expect(await stored()).toEqual(before);
    });

    it('refuses an authorization request of a registered client and redirect URI whose state has a NUL, without redirecting to it', async () => {
      const before = await stored();
      const url = `${authorizeUrl(web, { state: 'state-123' })}`.replace('state-123', 'state%00');
      expectErrorPage(await new Browser(t.oauth.app).get(url), 400, 'Invalid request', QUERY_NUL);
      expect(await stored()).toEqual(before);
      // The same request without the NUL goes on to sign in: the refusal above was about the NUL alone.
      const fine = await new Browser(t.oauth.app).get(authorizeUrl(web));
      expect({ status: fine.statusCode, location: String(fine.headers.location) }).toEqual({ status: 303, location: expect.stringMatching(/^\/oauth\/login\?interaction=/) });
    });

    it('refuses an authorization request posted as a form with a NUL in its redirect_uri', async () => {
      const before = await stored();
      const payload = new URLSearchParams(authorizeUrl(web).split('?')[1]).toString().replace(encodeURIComponent(REDIRECT_URI), `${encodeURIComponent(REDIRECT_URI)}%00`);
      const reply = await t.oauth.app.inject({ method: 'POST', url: '/oauth/authorize', headers: FORM, payload });
      expectErrorPage(reply, 400, 'Invalid request', FORM_NUL);
      expect(await stored()).toEqual(before);
    });

    it('refuses a sign-in with a NUL in the email, with a valid CSRF token, before the password is checked', async () => {
      const browser = new Browser(t.oauth.app);
      const login = await browser.visit('/oauth/login');
      const fields = { ...hiddenInputs(login.body), email: `${user.email}\u0000`, password: PASSWORD };
      expect(Object.keys(fields)).toContain('csrf_token');
      const before = await stored();
      expectErrorPage(await browser.post('/oauth/login', fields), 400, 'Invalid request', FORM_NUL);
      expect(await stored()).toEqual(before);
      // The same form without the NUL signs the user in.
      expect(pageHeading((await browser.submit('/oauth/login', { ...fields, email: user.email })).body)).toBe('Your account');
    });

    it('refuses a NUL in the consent, device and logout forms of a signed-in browser, doing nothing', async () => {
      const browser = new Browser(t.oauth.app);
      const login = await browser.visit('/oauth/login');
      expect(pageHeading((await browser.submit('/oauth/login', { ...hiddenInputs(login.body), email: user.email, password: PASSWORD })).body)).toBe('Your account');
      const consent = await browser.visit(authorizeUrl(web));
      const started = await t.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: { ...FORM, authorization: basic(service.client.clientId, service.secret) }, payload: form({ scope: 'read:posts' }) });
      const device = await browser.visit(`/oauth/device?user_code=${(started.json() as { user_code: string }).user_code}`);
      const logout = await browser.visit('/oauth/logout');
      const forms: [string, [string, string][]][] = [
        ['/oauth/consent', [...Object.entries(hiddenInputs(consent.body)), ['scope', 'read:posts\u0000'], ['decision', 'allow']]],
        ['/oauth/device', [...Object.entries(hiddenInputs(device.body)), ['scope', 'read:posts'], ['decision', 'allow\u0000']]],
        ['/oauth/logout', [...Object.entries(hiddenInputs(logout.body)), ['state', '\u0000']]],
      ];
      for (const [url, fields] of forms) {
        expect(fields.map(([name]) => name), url).toContain('csrf_token');
        const before = await stored();
        expectErrorPage(await browser.post(url, fields), 400, 'Invalid request', FORM_NUL);
        expect(await stored(), url).toEqual(before);
      }
      // Still signed in, and the consent form still works without the NUL.
      const allowed = await browser.post('/oauth/consent', [...Object.entries(hiddenInputs(consent.body)), ['scope', 'read:posts'], ['decision', 'allow']]);
      expect({ status: allowed.statusCode, location: String(allowed.headers.location) }).toEqual({ status: 303, location: expect.stringMatching(/^https:\/\/app\.example\/cb\?code=/) });
    });
  });
});
