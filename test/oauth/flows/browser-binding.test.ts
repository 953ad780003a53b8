import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import type { TestClient } from '../fixtures.js';
import { form, FORM } from '../oauth-app.js';
import { Browser, expectPage, type Reply } from './browser.js';
import { answerConsent, authorizeUrl, codeOf, createUser, createWebClient, openFlowApp, PASSWORD, signIn, type FlowApp } from './flow.js';

// The browser-binding cookie ties interactions and form tokens to one browser. It is SameSite=Lax, so a
// form post from another site arrives without it: answering that post with a new binding would replace
// the browser's, and break every sign-in and form it has in progress — at an attacker page's will. Only a
// request that would carry the cookie (a top-level GET) may set it, and only when it is absent.

const BINDING = '__Host-portcullis-browser';
const SESSION = '__Host-portcullis-session';
const KNOWN_DEVICE = '__Host-portcullis-device';

function setCookieNames(reply: Reply): string[] {
  const header = reply.headers['set-cookie'];
  const lines = header === undefined ? [] : Array.isArray(header) ? header : [header];
  return lines.map((line) => line.slice(0, line.indexOf('=')));
}

describe.each(DATABASE_KINDS)('the browser-binding cookie on %s', (kind) => {
  let t: FlowApp;
  let user: UserRecord;
  let web: TestClient;

  beforeAll(async () => {
    t = await openFlowApp(kind);
    user = await createUser(t.db);
    web = await createWebClient(t.db);
  });
  afterAll(async () => {
    await t.close();
  });

  /** What a browser sends on a cross-site form post under SameSite=Lax: the form, and no cookie. */
  const crossSitePost = (url: string, fields: Record<string, string>) =>
    t.oauth.app.inject({ method: 'POST', url, headers: FORM, payload: form(fields), remoteAddress: '203.0.113.9' });

  it('is not replaced by a cross-site post to /oauth/authorize, which is sent on as a GET; the sign-in in progress goes on', async () => {
    const browser = new Browser(t.oauth.app);
    const loginPage = await browser.visit(authorizeUrl(web));
    expectPage(loginPage, 'login');
    const binding = browser.cookies.get(BINDING);
    expect(binding).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const forged = Object.fromEntries(new URL(authorizeUrl(web, { state: 'attacker' }), 'https://x').searchParams);
    const posted = await crossSitePost('/oauth/authorize', forged);
    expect({ status: posted.statusCode, location: posted.headers.location, cookies: setCookieNames(posted), body: posted.body }).toEqual({
      status: 303,
      location: `/oauth/authorize?${new URLSearchParams(forged).toString()}`,
      cookies: [],
      body: '',
    });
    expect(posted.headers).toMatchObject({ 'cache-control': 'no-store', 'referrer-policy': 'no-referrer', 'x-frame-options': 'DENY' });

    // The browser follows with a GET, which carries its cookie: no new binding either.
    const followed = await browser.get(String(posted.headers.location));
    expect({ status: followed.statusCode, cookies: setCookieNames(followed) }).toEqual({ status: 303, cookies: [] });
    expect(browser.cookies.get(BINDING)).toBe(binding);
    // The form the user had open still verifies, and the sign-in continues to the consent page.
    expectPage(await signIn(browser, loginPage, user.email), 'consent');
  });

  it('is set by no form post: each answers without Set-Cookie for it when the post carries none', async () => {
    const pages = ['/oauth/login', '/oauth/consent', '/oauth/device', '/oauth/account/password', '/oauth/account/applications/revoke', '/oauth/account/sign-out-everywhere', '/oauth/logout'];
    for (const url of pages) {
      const reply = await crossSitePost(url, { csrf_token: 'x', interaction: 'y', user_code: 'BCDF-GHJK', email: user.email, password: PASSWORD });
      expect({ url, binding: setCookieNames(reply).includes(BINDING) }).toEqual({ url, binding: false });
    }
    // The RP-initiated logout may be posted (OpenID Connect RP-Initiated Logout §2): it is asked again as a GET.
    const logout = await crossSitePost('/oauth/logout', { client_id: web.client.clientId, csrf_token: 'from-elsewhere' });
    expect({ status: logout.statusCode, location: logout.headers.location, cookies: setCookieNames(logout) }).toEqual({
      status: 303,
      location: `/oauth/logout?client_id=${web.client.clientId}`,
      cookies: [],
    });
  });

  it('is set once, by the first GET of a browser that has none, and neither replaced by later pages nor by signing in', async () => {
    const browser = new Browser(t.oauth.app);
    const loginPage = await browser.visit(authorizeUrl(web));
    expect(browser.setCookies.filter((line) => line.startsWith(`${BINDING}=`))).toEqual([`${BINDING}=${browser.cookies.get(BINDING)}; Path=/; HttpOnly; SameSite=Lax; Secure`]);
    const before = browser.setCookies.length;
    const consentPage = await signIn(browser, loginPage, user.email);
    expectPage(consentPage, 'consent');
    for (const url of ['/oauth/account', '/oauth/device', authorizeUrl(web), '/oauth/login', '/oauth/logout']) await browser.visit(url);
    // The sign-in set the session cookie and the known-device cookie, and nothing else was set since.
    expect(browser.setCookies.slice(before).map((line) => line.slice(0, line.indexOf('=')))).toEqual([SESSION, KNOWN_DEVICE]);
    // The consent form rendered before those visits still verifies.
    codeOf(await answerConsent(browser, consentPage), t.config.issuer);
  });
});
