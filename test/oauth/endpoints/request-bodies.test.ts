import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { createClient, type TestClient } from '../fixtures.js';
import { basic, form, FORM } from '../oauth-app.js';
import { Browser, expectErrorPage, hiddenInputs, pageHeading, type Reply } from '../flows/browser.js';
import { authorizeUrl, countRows, createUser, createWebClient, NO_STORE, openFlowApp, PASSWORD, type FlowApp } from '../flows/flow.js';

// What the authorization server does with a body it cannot take: too large (413), not a form (415), a
// parameter sent twice (400). JSON endpoints answer in RFC 6749's error shape, pages with the error page;
// none of them acts on the request or stores anything.

const BODY_LIMIT = 2048;
const TOO_LARGE = `The request body is larger than ${BODY_LIMIT} bytes.`;
const NOT_A_FORM = 'The request body must be application/x-www-form-urlencoded.';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

interface Body {
  headers?: Record<string, string>;
  payload?: string | Readable;
}

/** The ways a body goes wrong, each with the status and description it must be answered with. */
const BAD_BODIES: readonly [string, (fields: [string, string][]) => Body, number, string][] = [
  ['a form over BODY_LIMIT', (fields) => ({ headers: FORM, payload: encode([...fields, ['padding', 'x'.repeat(BODY_LIMIT)]]) }), 413, TOO_LARGE],
  [
    'a form over BODY_LIMIT sent without Content-Length',
    (fields) => ({ headers: FORM, payload: Readable.from([encode(fields), `&padding=${'x'.repeat(BODY_LIMIT)}`]) }),
    413,
    TOO_LARGE,
  ],
  ['a JSON body', (fields) => ({ headers: { 'content-type': 'application/json' }, payload: JSON.stringify(Object.fromEntries(fields)) }), 415, NOT_A_FORM],
  ['a form without Content-Type', (fields) => ({ payload: encode(fields) }), 415, NOT_A_FORM],
  ['a text/plain body', (fields) => ({ headers: { 'content-type': 'text/plain' }, payload: encode(fields) }), 415, NOT_A_FORM],
];

function encode(fields: [string, string][]): string {
  return new URLSearchParams(fields).toString();
}

describe.each(DATABASE_KINDS)('request bodies at /oauth/ on %s', (kind) => {
  let t: FlowApp;
  let service: TestClient;
  let user: UserRecord;
  let signedIn: Browser;
  /** Each page's form fields, as its page rendered them for the signed-in browser (or a fresh one for login). */
  const pageForms: Record<string, { browser: Browser; fields: [string, string][] }> = {};

  beforeAll(async () => {
    t = await openFlowApp(kind, { BODY_LIMIT: String(BODY_LIMIT) });
    service = await createClient(t.db, { grantTypes: ['client_credentials', DEVICE_GRANT] });
    user = await createUser(t.db);
    const web = await createWebClient(t.db);

    const anonymous = new Browser(t.oauth.app);
    const login = await anonymous.visit('/oauth/login');
    pageForms['/oauth/login'] = { browser: anonymous, fields: [...Object.entries(hiddenInputs(login.body)), ['email', user.email], ['password', PASSWORD]] };

    signedIn = new Browser(t.oauth.app);
    const own = await signedIn.visit('/oauth/login');
    expect(pageHeading((await signedIn.submit('/oauth/login', { ...hiddenInputs(own.body), email: user.email, password: PASSWORD })).body)).toBe('Your account');
    // An application the user allowed, so that the account page has a revoke form.
    const allowed = await createWebClient(t.db, { name: 'Allowed app' });
    const allow = await signedIn.visit(authorizeUrl(allowed));
    expect((await signedIn.post('/oauth/consent', [...Object.entries(hiddenInputs(allow.body)), ['scope', 'read:posts'], ['decision', 'allow']])).statusCode).toBe(303);
    const account = (await signedIn.get('/oauth/account')).body;
    const accountForm = (action: string): [string, string][] => {
      const start = account.indexOf(`action="${action}"`);
      return Object.entries(hiddenInputs(account.slice(start, account.indexOf('</form>', start))));
    };
    pageForms['/oauth/account/password'] = { browser: signedIn, fields: [...accountForm('/oauth/account/password'), ['current_password', PASSWORD], ['new_password', 'a brand new passphrase 42']] };
    pageForms['/oauth/account/applications/revoke'] = { browser: signedIn, fields: [...accountForm('/oauth/account/applications/revoke'), ] };
    pageForms['/oauth/account/sign-out-everywhere'] = { browser: signedIn, fields: accountForm('/oauth/account/sign-out-everywhere') };
    const consent = await signedIn.visit(authorizeUrl(web));
    pageForms['/oauth/consent'] = { browser: signedIn, fields: [...Object.entries(hiddenInputs(consent.body)), ['scope', 'read:posts'], ['decision', 'allow']] };
    const started = await t.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: { ...FORM, authorization: basic(service.client.clientId, service.secret) }, payload: form({ scope: 'read:posts' }) });
    const device = await signedIn.visit(`/oauth/device?user_code=${(started.json() as { user_code: string }).user_code}`);
    pageForms['/oauth/device'] = { browser: signedIn, fields: [...Object.entries(hiddenInputs(device.body)), ['scope', 'read:posts'], ['decision', 'allow']] };
    const logout = await signedIn.visit('/oauth/logout');
    pageForms['/oauth/logout'] = { browser: signedIn, fields: Object.entries(hiddenInputs(logout.body)) };
    for (const [url, { fields }] of Object.entries(pageForms)) expect(fields.map(([name]) => name), url).toContain('csrf_token');
  });
  afterAll(() => t.close());

  /** Rows and audit decisions a request could have added: none may appear. */
  async function stored() {
    const deviceCodes = await t.db.kysely.selectFrom('deviceCodes').select(['status']).execute();
    return {
      accessTokens: await countRows(t.db, 'accessTokens'),
      loginSessions: await countRows(t.db, 'loginSessions'),
      consents: await countRows(t.db, 'consents'),
      deviceCodes: deviceCodes.map((row) => row.status).sort(),
      decisions: t.oauth.decisions.length,
    };
  }

  describe.each([
    ['/oauth/token', [['grant_type', 'client_credentials']]],
    ['/oauth/revoke', [['token', 'x'.repeat(43)]]],
    ['/oauth/introspect', [['token', 'x'.repeat(43)]]],
    ['/oauth/device_authorization', [['scope', 'read:posts']]],
  ] as [string, [string, string][]][])('POST %s', (url, fields) => {
    const send = (body: Body): Promise<Reply> =>
      t.oauth.app.inject({ method: 'POST', url, headers: { ...body.headers, authorization: basic(service.client.clientId, service.secret) }, payload: body.payload });

    function expectOAuthError(reply: Reply, status: number, description: string): void {
      expect({ status: reply.statusCode, body: reply.json() }).toEqual({ status, body: { error: 'invalid_request', error_description: description } });
      expect(reply.headers).toMatchObject(NO_STORE);
      expect(reply.headers['content-type']).toBe('application/json; charset=utf-8');
    }

    it.each(BAD_BODIES)('answers %s with the status and RFC 6749 error it deserves, storing nothing', async (_what, body, status, description) => {
      const before = await stored();
      expectOAuthError(await send(body(fields)), status, description);
      expect(await stored()).toEqual(before);
    });

    it('answers a repeated parameter with 400 invalid_request naming it, storing nothing', async () => {
      const [name, value] = fields[0]!;
      const before = await stored();
      expectOAuthError(await send({ headers: FORM, payload: encode([...fields, [name, value]]) }), 400, `The ${name} parameter is repeated.`);
      expect(await stored()).toEqual(before);
    });

    it('takes the same request as a form within BODY_LIMIT (the refusals above are about the body alone)', async () => {
      const reply = await send({ headers: FORM, payload: encode(fields) });
      expect(reply.statusCode).toBe(200);
    });
  });

  describe.each([
    '/oauth/login',
    '/oauth/consent',
    '/oauth/device',
    '/oauth/account/password',
    '/oauth/account/applications/revoke',
    '/oauth/account/sign-out-everywhere',
    '/oauth/logout',
  ])('POST %s', (url) => {
    const send = (body: Body): Promise<Reply> => {
      const { browser } = pageForms[url]!;
      return t.oauth.app.inject({ method: 'POST', url, headers: { ...body.headers, cookie: browser.cookieHeader()! }, payload: body.payload });
    };

    it.each(BAD_BODIES)('answers %s with the error page and that status, doing nothing', async (_what, body, status, description) => {
      const before = await stored();
      expectErrorPage(await send(body(pageForms[url]!.fields)), status, 'Invalid request', description);
      expect(await stored()).toEqual(before);
    });

    it('answers a repeated field with a 400 error page naming it, doing nothing', async () => {
      const { fields } = pageForms[url]!;
      const before = await stored();
      const csrf = fields.find(([name]) => name === 'csrf_token')!;
      expectErrorPage(await send({ headers: FORM, payload: encode([...fields, csrf]) }), 400, 'Invalid request', 'The csrf_token field is repeated.');
      expect(await stored()).toEqual(before);
    });
  });

  it('refuses a password sent twice on the login page as a repeated field, not as a wrong password', async () => {
    const { browser, fields } = pageForms['/oauth/login']!;
    const before = await stored();
    const reply = await t.oauth.app.inject({ method: 'POST', url: '/oauth/login', headers: { ...FORM, cookie: browser.cookieHeader()! }, payload: encode([...fields, ['password', 'second']]) });
    expectErrorPage(reply, 400, 'Invalid request', 'The password field is repeated.');
    expect(await stored()).toEqual(before);
  });

  it('leaves the signed-in browser signed in and its forms working after all of the above', async () => {
    expect(pageHeading((await signedIn.get('/oauth/account')).body)).toBe('Your account');
    const { fields } = pageForms['/oauth/consent']!;
    const reply = await signedIn.post('/oauth/consent', [...fields, ['scope', 'write:posts']]);
    expect(reply.statusCode).toBe(303);
    expect(String(reply.headers.location)).toMatch(/^https:\/\/app\.example\/cb\?code=/);
  });
});
