import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { Browser, expectPage, hiddenInputs, type Reply } from './browser.js';
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
  signIn,
  type FlowApp,
} from './flow.js';

// RFC 8252 §8.6: a public client redirecting to a loopback address or a private-use scheme cannot be
// authenticated; another app on the device can use its client_id. Such a request is never approved
// without the user seeing it: no remembered consent, no first-party shortcut, and prompt=none is refused.
// A public client redirecting to https (a single-page app) keeps both, as does a confidential client.

const UNVERIFIABLE = 'This application cannot be verified, so the user must allow each request.';
const PRIVATE_USE_URI = 'com.example.app:/oauth-callback';

describe.each(DATABASE_KINDS)('public native clients (RFC 8252 §8.6) on %s', (kind) => {
  let t: FlowApp;
  let user: UserRecord;
  /** Signed in once; every test below starts from this session. */
  let browser: Browser;

  beforeAll(async () => {
    t = await openFlowApp(kind);
    user = await createUser(t.db);
    browser = new Browser(t.oauth.app);
    const loginPage = await browser.visit(authorizeUrl(await createWebClient(t.db)));
    expectPage(await signIn(browser, loginPage, user.email), 'consent');
  });
  afterAll(async () => {
    await t.close();
  });

  /** The parameters of a 303 to a private-use URI (which `new URL` gives no origin). */
  function privateUseRedirect(reply: Reply): Record<string, string> {
    expect(reply.statusCode, reply.body).toBe(303);
    expect(reply.body).toBe('');
    const location = String(reply.headers.location);
    expect(location.startsWith(`${PRIVATE_USE_URI}?`)).toBe(true);
    return Object.fromEntries(new URL(location).searchParams);
  }

  it('asks every time for a loopback client, even with the same scopes allowed a moment ago', async () => {
    const native = await createNativeClient(t.db);
    const first = await obtainCode(t, browser, native, user);
    expect(first.code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const consents = await countRows(t.db, 'consents');
    const codes = await countRows(t.db, 'authorizationCodes');
    // A remembered consent exists; it is not enough.
    const again = await browser.visit(authorizeUrl(native));
    expectPage(again, 'consent');
    expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
    codeOf(await answerConsent(browser, again), t.config.issuer, 'state-123', native.client.redirectUris[0]);
    expect(await countRows(t.db, 'consents')).toBe(consents);
  });

  it('answers prompt=none for a loopback client with consent_required, whatever was allowed before, on IPv4 and IPv6 and any port', async () => {
    for (const redirectUri of ['http://127.0.0.1/cb', 'http://[::1]/cb']) {
      const native = await createNativeClient(t.db, { redirectUris: [redirectUri] });
      await obtainCode(t, browser, native, user);
      const codes = await countRows(t.db, 'authorizationCodes');
      const withPort = redirectUri.replace('/cb', ':53124/cb');
      const reply = await browser.get(authorizeUrl(native, { redirectUri: withPort, extra: { prompt: 'none' } }));
      expectErrorRedirect(reply, t.config.issuer, 'consent_required', UNVERIFIABLE, 'state-123', withPort);
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
    }
  });

  it('shows the consent page to a first-party native client too', async () => {
    const native = await createNativeClient(t.db, { name: 'Portcullis Desktop', firstParty: true });
    const page = await browser.visit(authorizeUrl(native));
    expectPage(page, 'consent');
    expect(page.body).toContain('<h1>Allow Portcullis Desktop access?</h1>');
    codeOf(await answerConsent(browser, page), t.config.issuer, 'state-123', native.client.redirectUris[0]);
    expectErrorRedirect(await browser.get(authorizeUrl(native, { extra: { prompt: 'none' } })), t.config.issuer, 'consent_required', UNVERIFIABLE, 'state-123', native.client.redirectUris[0]);
  });

  it('treats a private-use URI scheme the same way', async () => {
    const native = await createNativeClient(t.db, { redirectUris: [PRIVATE_USE_URI], firstParty: true });
    for (let round = 0; round < 2; round++) {
      const page = await browser.visit(authorizeUrl(native));
      expectPage(page, 'consent');
      const { interaction, csrf_token } = hiddenInputs(page.body);
      const answered = await browser.post('/oauth/consent', [['interaction', interaction!], ['csrf_token', csrf_token!], ['scope', 'read:posts'], ['decision', 'allow']]);
      expect(privateUseRedirect(answered)).toEqual({ code: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), state: 'state-123', iss: t.config.issuer });
    }
    expect(privateUseRedirect(await browser.get(authorizeUrl(native, { extra: { prompt: 'none' } })))).toEqual({
      error: 'consent_required',
      error_description: UNVERIFIABLE,
      state: 'state-123',
      iss: t.config.issuer,
    });
  });

  it('keeps remembered consent and silent prompt=none for a public client on https (a single-page app)', async () => {
    const spa = await createWebClient(t.db, { type: 'public', secretHash: null, grantTypes: ['authorization_code'], redirectUris: ['https://spa.example/cb'] });
    await obtainCode(t, browser, spa, user);
    codeOf(await browser.get(authorizeUrl(spa)), t.config.issuer, 'state-123', 'https://spa.example/cb');
    codeOf(await browser.get(authorizeUrl(spa, { extra: { prompt: 'none' } })), t.config.issuer, 'state-123', 'https://spa.example/cb');
  });

  it('keeps remembered consent for a confidential client on a loopback address (it authenticates when it redeems the code)', async () => {
    const desktop = await createWebClient(t.db, { redirectUris: ['http://127.0.0.1/cb'] });
    await obtainCode(t, browser, desktop, user);
    codeOf(await browser.get(authorizeUrl(desktop, { extra: { prompt: 'none' } })), t.config.issuer, 'state-123', 'http://127.0.0.1/cb');
  });
});
