import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SignInThrottle } from '../../../src/limits/sign-in-throttle.js';
import { CsrfTokens } from '../../../src/oauth/browser/csrf.js';
import { hashPassword } from '../../../src/oauth/passwords.js';
import { revokeUserTokens } from '../../../src/oauth/tokens/access-token-records.js';
import { updatePasswordHash } from '../../../src/storage/users.js';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import type { TestClient } from '../fixtures.js';
import { Browser, emailField, expectErrorPage, expectPage, hiddenInputs, offeredScopes, pageAlert, type Reply } from './browser.js';
import {
  answerConsent,
  authorizeUrl,
  codeOf,
  countRows,
  createUser,
  createWebClient,
  exchangeCode,
  expectErrorRedirect,
  expectTokens,
  openFlowApp,
  PASSWORD,
  pkce,
  signIn,
  type FlowApp,
} from './flow.js';

const WRONG = 'The email or password is wrong.';
const FORM_EXPIRED = ['Form expired', 'The form could not be verified.', 'Reload the page and try again.'] as const;
const SIGN_IN_EXPIRED = ['Sign-in expired', 'This sign-in page has expired or was opened in another browser.', 'Return to the application and start again.'] as const;
const REQUEST_EXPIRED = [
  'Request expired',
  'This authorization request has expired, was answered already, or was opened in another browser.',
  'Return to the application and start again.',
] as const;
const SESSION_COOKIE = '__Host-portcullis-session';
const BROWSER_COOKIE = '__Host-portcullis-browser';

describe.each(DATABASE_KINDS)('login and consent pages on %s', (kind) => {
  let t: FlowApp;
  let user: UserRecord;
  let web: TestClient;
  let csrf: CsrfTokens;

  beforeAll(async () => {
    t = await openFlowApp(kind);
    user = await createUser(t.db);
    web = await createWebClient(t.db);
    csrf = new CsrfTokens(t.config.keyEncryptionSecret);
  });
  afterAll(async () => {
    await t.close();
  });

  /** A fresh browser on the login page of a new authorization request. */
  async function atLogin(url = authorizeUrl(web), remoteAddress?: string): Promise<{ browser: Browser; page: Reply; form: Record<string, string> }> {
    const browser = new Browser(t.oauth.app, remoteAddress);
    const page = await browser.visit(url);
    expectPage(page, 'login');
    return { browser, page, form: hiddenInputs(page.body) };
  }

  /** Nothing signed in: no session cookie set, no session row written. */
  async function expectNoSignIn(reply: Reply, sessionsBefore: number): Promise<void> {
    expect(String(reply.headers['set-cookie'] ?? '')).not.toContain('portcullis-session');
    expect(await countRows(t.db, 'loginSessions')).toBe(sessionsBefore);
  }

  describe('POST /oauth/login', () => {
    it('answers a wrong password with 401, the form again with the email kept, and a denial in the audit log', async () => {
      const { browser, form } = await atLogin();
      const sessions = await countRows(t.db, 'loginSessions');
      const reply = await browser.post('/oauth/login', { ...form, email: user.email, password: 'wrong password' });
      expectPage(reply, 'login', 401);
      expect(pageAlert(reply.body)).toBe(WRONG);
      expect(emailField(reply.body)).toBe(user.email);
      expect(reply.body).not.toContain('wrong password');
      expect(hiddenInputs(reply.body)).toEqual(form);
      await expectNoSignIn(reply, sessions);
      expect(t.oauth.decisions.at(-1)).toEqual({
        requestId: expect.any(String),
        sourceAddress: '127.0.0.1',
        interface: 'oauth',
        operation: 'login',
        subject: null,
        clientId: null,
        resourceType: null,
        resourceId: null,
        decision: 'deny',
        reason: 'authentication',
      });
      // The same form, with the right password, goes on.
      expectPage(await browser.submit('/oauth/login', { ...form, email: user.email, password: PASSWORD }), 'consent');
      expect(t.oauth.decisions.at(-1)).toMatchObject({ operation: 'login', subject: user.id, decision: 'allow', reason: 'authenticated' });
    });

    it('opens no session when the password changes while it is being checked (the old password signs nobody in)', async () => {
      const victim = await createUser(t.db);
      const { browser, form } = await atLogin();
      const sessions = await countRows(t.db, 'loginSessions');
      // The change commits after the login read the user's row and checked the old password, before the
      // session is stored: exactly the window a slow password hash leaves.
      let changed = false;
      const attempt = vi.spyOn(SignInThrottle.prototype, 'attempt').mockImplementationOnce(async function (this: SignInThrottle, request, check) {
        attempt.mockRestore();
        return this.attempt(request, async () => {
          const checked = await check();
          changed = true;
          await t.db.kysely.transaction().execute(async (trx) => {
            const now = new Date().toISOString();
            await updatePasswordHash(trx, victim.id, await hashPassword('a new password, not the old one'), now);
            await revokeUserTokens(trx, victim.id, now);
          });
          return checked;
        });
      });
      const reply = await browser.post('/oauth/login', { ...form, email: victim.email, password: PASSWORD });
      expect(changed).toBe(true);
      expectPage(reply, 'login', 401);
      expect(pageAlert(reply.body)).toBe(WRONG);
      await expectNoSignIn(reply, sessions);
      expect(t.oauth.decisions.at(-1)).toMatchObject({ operation: 'login', subject: null, decision: 'deny', reason: 'authentication' });
      // Signing in with the new password works.
      const again = await atLogin();
      expectPage(await again.browser.submit('/oauth/login', { ...again.form, email: victim.email, password: 'a new password, not the old one' }), 'consent');
    });

    it('answers an unknown email exactly like a wrong password', async () => {
      const { browser, form } = await atLogin();
      const unknown = 'nobody-here@example.com';
      const wrongPassword = await browser.post('/oauth/login', { ...form, email: user.email, password: 'wrong password' });
      const unknownEmail = await browser.post('/oauth/login', { ...form, email: unknown, password: 'wrong password' });
      expect(unknownEmail.statusCode).toBe(wrongPassword.statusCode);
      expect(unknownEmail.headers).toEqual({ ...wrongPassword.headers, date: unknownEmail.headers.date, 'content-length': unknownEmail.headers['content-length'] });
      expect(unknownEmail.body.replace(unknown, '<email>')).toBe(wrongPassword.body.replace(user.email, '<email>'));
    });

    it('refuses an empty or missing password without checking anything', async () => {
      const { browser, form } = await atLogin();
      const reply = await browser.post('/oauth/login', { ...form, email: user.email });
      expectPage(reply, 'login', 401);
      expect(pageAlert(reply.body)).toBe(WRONG);
    });

    it.each([
      ['missing', (_form: Record<string, string>, _browser: string) => undefined],
      ['tampered', (form: Record<string, string>) => `${form.csrf_token!.slice(0, -1)}${form.csrf_token!.endsWith('A') ? 'B' : 'A'}`],
      ['issued to another browser for this very form', (form: Record<string, string>) => csrf.issue('b'.repeat(43), `login:${form.interaction}`)],
      ['issued for the consent form', (form: Record<string, string>, browser: string) => csrf.issue(browser, `consent:${form.interaction}`)],
    ])('refuses a CSRF token that is %s with 403, signing nobody in', async (_what, token) => {
      const { browser, form } = await atLogin();
      const sessions = await countRows(t.db, 'loginSessions');
      const decisions = t.oauth.decisions.length;
      const forged = token(form, browser.cookies.get(BROWSER_COOKIE)!);
      const fields: Record<string, string> = { interaction: form.interaction!, email: user.email, password: PASSWORD };
      if (forged !== undefined) fields.csrf_token = forged;
      const reply = await browser.post('/oauth/login', fields);
      expectErrorPage(reply, 403, ...FORM_EXPIRED);
      await expectNoSignIn(reply, sessions);
      expect(t.oauth.decisions.length).toBe(decisions);
    });

    it('refuses the CSRF token of another browser’s own login form', async () => {
      const victim = await atLogin();
      const attacker = await atLogin();
      const sessions = await countRows(t.db, 'loginSessions');
      const reply = await victim.browser.post('/oauth/login', { interaction: victim.form.interaction!, csrf_token: attacker.form.csrf_token!, email: user.email, password: PASSWORD });
      expectErrorPage(reply, 403, ...FORM_EXPIRED);
      await expectNoSignIn(reply, sessions);
    });

    it('refuses an interaction opened in another browser, even with a form token valid for that browser', async () => {
      const victim = await atLogin();
      const attacker = await atLogin();
      const sessions = await countRows(t.db, 'loginSessions');
      const token = csrf.issue(attacker.browser.cookies.get(BROWSER_COOKIE)!, `login:${victim.form.interaction}`);
      const reply = await attacker.browser.post('/oauth/login', { interaction: victim.form.interaction!, csrf_token: token, email: user.email, password: PASSWORD });
      expectErrorPage(reply, 400, ...SIGN_IN_EXPIRED);
      await expectNoSignIn(reply, sessions);
      expectErrorPage(await attacker.browser.get(`/oauth/login?interaction=${victim.form.interaction}`), 400, ...SIGN_IN_EXPIRED);
    });

    it('refuses an interaction posted without any browser cookie', async () => {
      const { form } = await atLogin();
      const sessions = await countRows(t.db, 'loginSessions');
      const reply = await new Browser(t.oauth.app).post('/oauth/login', { ...form, email: user.email, password: PASSWORD });
      expectErrorPage(reply, 400, ...SIGN_IN_EXPIRED);
      await expectNoSignIn(reply, sessions);
    });

    it('refuses an unknown interaction', async () => {
      const browser = new Browser(t.oauth.app);
      expectErrorPage(await browser.get(`/oauth/login?interaction=${'x'.repeat(43)}`), 400, ...SIGN_IN_EXPIRED);
    });

    it('refuses the sixth attempt from an address after five failures there with 429 and Retry-After, even with the right password', async () => {
      const target = await createUser(t.db);
      const { browser, form } = await atLogin(authorizeUrl(web), '192.0.2.10');
      const guesses = await Promise.all([0, 1, 2, 3, 4].map((i) => browser.post('/oauth/login', { ...form, email: target.email, password: `guess ${i}` })));
      expect(guesses.map((reply) => reply.statusCode)).toEqual([401, 401, 401, 401, 401]);
      const sessions = await countRows(t.db, 'loginSessions');
      const refused = await browser.post('/oauth/login', { ...form, email: target.email.toUpperCase(), password: PASSWORD });
      expectPage(refused, 'login', 429);
      expect(pageAlert(refused.body)).toBe('Too many failed sign-ins. Try again in 15 minutes.');
      // The window opened when the first guess was reserved, before its password check (seconds on a loaded machine).
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(840);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(900);
      await expectNoSignIn(refused, sessions);
      // The budget of this account from this address: five guesses do not lock the account's owner out
      // elsewhere (sign-in-throttling.test.ts covers the account's limit over all addresses), and another
      // account is not affected here.
      const elsewhere = await atLogin(authorizeUrl(web), '198.51.100.20');
      expectPage(await elsewhere.browser.submit('/oauth/login', { ...elsewhere.form, email: target.email, password: PASSWORD }), 'consent');
      expectPage(await browser.submit('/oauth/login', { ...form, email: user.email, password: PASSWORD }), 'consent');
    });

    it('replaces a planted session cookie with a new one (no session fixation)', async () => {
      const planted = 'p'.repeat(43);
      const { browser, form } = await atLogin();
      browser.cookies.set(SESSION_COOKIE, planted);
      await browser.submit('/oauth/login', { ...form, email: user.email, password: PASSWORD });
      expect(browser.cookies.get(SESSION_COOKIE)).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(browser.cookies.get(SESSION_COOKIE)).not.toBe(planted);
    });

    it('ends the session the browser had when it signs in again, and gives a new one', async () => {
      const { browser, page } = await atLogin();
      await signIn(browser, page, user.email);
      const first = browser.cookies.get(SESSION_COOKIE)!;
      const again = await browser.visit(authorizeUrl(web, { extra: { prompt: 'login' } }));
      await signIn(browser, again, user.email);
      const second = browser.cookies.get(SESSION_COOKIE)!;
      expect(second).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(second).not.toBe(first);
      // The old session cookie no longer signs anybody in.
      const stale = new Browser(t.oauth.app);
      stale.cookies.set(BROWSER_COOKIE, browser.cookies.get(BROWSER_COOKIE)!);
      stale.cookies.set(SESSION_COOKIE, first);
      expectErrorRedirect(await stale.get(authorizeUrl(web, { extra: { prompt: 'none' } })), t.config.issuer, 'login_required', 'The user is not signed in.');
    });

    it('does not sign in a deactivated user', async () => {
      const inactive = await createUser(t.db, { active: false });
      const { browser, form } = await atLogin();
      const reply = await browser.post('/oauth/login', { ...form, email: inactive.email, password: PASSWORD });
      expectPage(reply, 'login', 401);
      expect(pageAlert(reply.body)).toBe(WRONG);
    });

    it('refuses a replayed login form once its interaction ended in a code', async () => {
      const firstParty = await createWebClient(t.db, { firstParty: true });
      const { browser, form } = await atLogin(authorizeUrl(firstParty));
      const fields = { ...form, email: user.email, password: PASSWORD };
      codeOf(await browser.post('/oauth/login', fields), t.config.issuer);
      const codes = await countRows(t.db, 'authorizationCodes');
      expectErrorPage(await browser.post('/oauth/login', fields), 400, ...SIGN_IN_EXPIRED);
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
    });
  });

  describe('error pages', () => {
    it('show one instruction: try again in a moment while the database is unreachable, return to the application on a failure', async () => {
      const kysely = t.db.kysely;
      const failures = [
        [Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:5432'), { code: 'ECONNREFUSED' }), 503, 'Temporarily unavailable', 'The service is temporarily unavailable.', 'Try again in a moment.'],
        [new Error('select from "interactions" failed at /work/src/storage/interactions.ts:12'), 500, 'Something went wrong', 'The server could not complete the request.', 'Return to the application you came from and try again.'],
      ] as const;
      for (const [error, status, title, message, instruction] of failures) {
        const spy = vi.spyOn(kysely, 'selectFrom').mockImplementation((() => {
          throw error;
        }) as typeof kysely.selectFrom);
        try {
          const reply = await new Browser(t.oauth.app).get(authorizeUrl(web));
          expectErrorPage(reply, status, title, message, instruction);
          expect(reply.headers['retry-after']).toBe(status === 503 ? '2' : undefined);
        } finally {
          spy.mockRestore();
        }
      }
    });
  });

  describe('consent', () => {
    /** Signed in once for the consent tests; each test uses its own client, so nothing is remembered for it. */
    let browser: Browser;

    beforeAll(async () => {
      browser = new Browser(t.oauth.app);
      const page = await browser.visit(authorizeUrl(web));
      expectPage(await signIn(browser, page, user.email), 'consent');
    });

    async function consentPageFor(client: TestClient, options: Parameters<typeof authorizeUrl>[1] = {}): Promise<Reply> {
      const page = await browser.visit(authorizeUrl(client, options));
      expectPage(page, 'consent');
      return page;
    }

    it('lists each requested scope with its description, escaped client name included', async () => {
      const client = await createWebClient(t.db, { name: 'Evil <b>App</b>' });
      const page = await consentPageFor(client, { scope: 'openid read:posts' });
      expect(page.body).toContain('<h1>Allow Evil &lt;b&gt;App&lt;/b&gt; access?</h1>');
      expect(offeredScopes(page.body)).toEqual(['openid', 'read:posts']);
      expect(page.body).toContain('<strong>read:posts</strong><br>Description of read:posts</span>');
      expect(page.headers['content-security-policy']).toContain("form-action 'self' https://app.example;");
    });

    it('grants only the scopes left ticked', async () => {
      const client = await createWebClient(t.db);
      const challenge = pkce();
      const page = await consentPageFor(client, { pkce: challenge });
      const code = codeOf(await answerConsent(browser, page, { scopes: ['read:posts'] }), t.config.issuer);
      expectTokens(await exchangeCode(t, client, code, { code_verifier: challenge.verifier }), { scope: 'read:posts', refreshToken: true, idToken: false });
      expect(t.oauth.decisions.filter((decision) => decision.operation === 'consent').at(-1)).toEqual({
        requestId: expect.any(String),
        interface: 'oauth',
        operation: 'consent',
        subject: user.id,
        clientId: client.client.clientId,
        resourceType: null,
        resourceId: null,
        decision: 'allow',
        reason: 'granted',
        scopes: 'read:posts',
      });
      // What was unticked is asked again next time.
      expectPage(await browser.visit(authorizeUrl(client)), 'consent');
    });

    it('issues no refresh token when the user unticked offline_access, with or without OpenID Connect; one when it was left ticked', async () => {
      const client = await createWebClient(t.db);
      for (const [scope, ticked, expected] of [
        ['read:posts offline_access', ['read:posts'], { scope: 'read:posts', refreshToken: false, idToken: false }],
        ['openid read:posts offline_access', ['openid', 'read:posts'], { scope: 'openid read:posts', refreshToken: false, idToken: true }],
        ['read:posts offline_access', ['read:posts', 'offline_access'], { scope: 'read:posts offline_access', refreshToken: true, idToken: false }],
      ] as const) {
        const challenge = pkce();
        const page = await consentPageFor(client, { scope, pkce: challenge });
        expect(offeredScopes(page.body)).toEqual(scope.split(' '));
        const code = codeOf(await answerConsent(browser, page, { scopes: [...ticked] }), t.config.issuer);
        expectTokens(await exchangeCode(t, client, code, { code_verifier: challenge.verifier }), expected);
        // The next request shows the consent page again while offline_access stays ungranted: start afresh.
        await t.db.kysely.deleteFrom('consents').where('clientId', '=', client.client.clientId).execute();
      }
    });

    it('remembers an unticked offline_access: a later request the consent covers, answered without the page, gets no refresh token either', async () => {
      const client = await createWebClient(t.db);
      const first = pkce();
      const page = await consentPageFor(client, { scope: 'read:posts offline_access', pkce: first });
      const code = codeOf(await answerConsent(browser, page, { scopes: ['read:posts'] }), t.config.issuer);
      expectTokens(await exchangeCode(t, client, code, { code_verifier: first.verifier }), { scope: 'read:posts', refreshToken: false, idToken: false });
      // Without offline_access in the request, the remembered consent covers it: no page, and still no refresh token.
      for (const extra of [{}, { prompt: 'none' }]) {
        const silent = pkce();
        const again = codeOf(await browser.visit(authorizeUrl(client, { scope: 'read:posts', pkce: silent, extra })), t.config.issuer);
        expectTokens(await exchangeCode(t, client, again, { code_verifier: silent.verifier }), { scope: 'read:posts', refreshToken: false, idToken: false });
      }
      // A page for another scope, answered in full, does not forget the decline.
      const other = pkce();
      const widened = await consentPageFor(client, { scope: 'read:posts write:posts', pkce: other });
      const wide = codeOf(await answerConsent(browser, widened, { scopes: ['read:posts', 'write:posts'] }), t.config.issuer);
      expectTokens(await exchangeCode(t, client, wide, { code_verifier: other.verifier }), { scope: 'read:posts write:posts', refreshToken: false, idToken: false });
      // Asking for it again shows the page; ticked this time, the refresh token comes, and the decline is forgotten.
      const ticked = pkce();
      const asked = await consentPageFor(client, { scope: 'read:posts offline_access', pkce: ticked });
      const granted = codeOf(await answerConsent(browser, asked, { scopes: ['read:posts', 'offline_access'] }), t.config.issuer);
      expectTokens(await exchangeCode(t, client, granted, { code_verifier: ticked.verifier }), { scope: 'read:posts offline_access', refreshToken: true, idToken: false });
      const later = pkce();
      const plain = codeOf(await browser.visit(authorizeUrl(client, { scope: 'read:posts', pkce: later })), t.config.issuer);
      expectTokens(await exchangeCode(t, client, plain, { code_verifier: later.verifier }), { scope: 'read:posts', refreshToken: true, idToken: false });
    });

    it('answers a denial with access_denied, state and iss, issuing no code', async () => {
      const client = await createWebClient(t.db);
      const page = await consentPageFor(client, { state: 'deny-state' });
      const codes = await countRows(t.db, 'authorizationCodes');
      const reply = await answerConsent(browser, page, { decision: 'deny' });
      expectErrorRedirect(reply, t.config.issuer, 'access_denied', 'The user denied the request.', 'deny-state');
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
      expect(t.oauth.decisions.at(-1)).toMatchObject({ operation: 'consent', subject: user.id, clientId: client.client.clientId, decision: 'deny', reason: 'consent', scopes: 'read:posts write:posts' });
      // Nothing is remembered from a denial.
      expectPage(await browser.visit(authorizeUrl(client)), 'consent');
    });

    it('treats allowing with every scope unticked as a denial, saying that no scope was allowed', async () => {
      const client = await createWebClient(t.db);
      const codes = await countRows(t.db, 'authorizationCodes');
      const reply = await answerConsent(browser, await consentPageFor(client), { scopes: [] });
      expectErrorRedirect(reply, t.config.issuer, 'access_denied', 'No scope was allowed.');
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
      expect(t.oauth.decisions.at(-1)).toMatchObject({ operation: 'consent', subject: user.id, clientId: client.client.clientId, decision: 'deny', reason: 'consent', scopes: 'read:posts write:posts' });
      // Nothing is remembered: the next request asks again.
      expectPage(await browser.visit(authorizeUrl(client)), 'consent');
    });

    it('remembers consent: the same scopes, or fewer, go straight back with a code', async () => {
      const client = await createWebClient(t.db);
      codeOf(await answerConsent(browser, await consentPageFor(client)), t.config.issuer);
      const again = await browser.get(authorizeUrl(client));
      codeOf(again, t.config.issuer);
      codeOf(await browser.get(authorizeUrl(client, { scope: 'write:posts' })), t.config.issuer);
    });

    it('asks again for a broader scope set, offering all of it', async () => {
      const client = await createWebClient(t.db);
      codeOf(await answerConsent(browser, await consentPageFor(client, { scope: 'read:posts' })), t.config.issuer);
      const broader = await consentPageFor(client, { scope: 'read:posts write:posts' });
      expect(offeredScopes(broader.body)).toEqual(['read:posts', 'write:posts']);
    });

    it('asks again with prompt=consent, even a first-party client', async () => {
      const client = await createWebClient(t.db);
      codeOf(await answerConsent(browser, await consentPageFor(client)), t.config.issuer);
      await consentPageFor(client, { extra: { prompt: 'consent' } });
      const firstParty = await createWebClient(t.db, { firstParty: true });
      await consentPageFor(firstParty, { extra: { prompt: 'consent' } });
    });

    it('does not grant a scope the request did not ask for, even if the form adds it', async () => {
      const client = await createWebClient(t.db);
      const challenge = pkce();
      const page = await consentPageFor(client, { scope: 'read:posts', pkce: challenge });
      const code = codeOf(await answerConsent(browser, page, { scopes: ['read:posts', 'write:posts'] }), t.config.issuer);
      expectTokens(await exchangeCode(t, client, code, { code_verifier: challenge.verifier }), { scope: 'read:posts', refreshToken: true, idToken: false });
      expectPage(await browser.visit(authorizeUrl(client, { scope: 'write:posts' })), 'consent');
    });

    it('answers a replayed consent form with an error page and no second code', async () => {
      const client = await createWebClient(t.db);
      const page = await consentPageFor(client);
      const form = hiddenInputs(page.body);
      const fields: [string, string][] = [...Object.entries(form), ['scope', 'read:posts'], ['decision', 'allow']];
      codeOf(await browser.post('/oauth/consent', fields), t.config.issuer);
      const codes = await countRows(t.db, 'authorizationCodes');
      expectErrorPage(await browser.post('/oauth/consent', fields), 400, ...REQUEST_EXPIRED);
      expectErrorPage(await browser.post('/oauth/consent', [...Object.entries(form), ['decision', 'deny']]), 400, ...REQUEST_EXPIRED);
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
    });

    it('refuses a consent form with a forged CSRF token, and one from another browser', async () => {
      const client = await createWebClient(t.db);
      const page = await consentPageFor(client);
      const form = hiddenInputs(page.body);
      const codes = await countRows(t.db, 'authorizationCodes');
      const forged = await browser.post('/oauth/consent', { interaction: form.interaction!, csrf_token: csrf.issue('b'.repeat(43), `consent:${form.interaction}`), scope: 'read:posts', decision: 'allow' });
      expectErrorPage(forged, 403, ...FORM_EXPIRED);
      const elsewhere = await new Browser(t.oauth.app).post('/oauth/consent', { ...form, scope: 'read:posts', decision: 'allow' });
      expectErrorPage(elsewhere, 400, ...REQUEST_EXPIRED);
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
      // The genuine form still works.
      codeOf(await answerConsent(browser, page), t.config.issuer);
    });

    it('sends a browser whose session ended back to the login page', async () => {
      const client = await createWebClient(t.db);
      const other = new Browser(t.oauth.app);
      const loginPage = await other.visit(authorizeUrl(client));
      const consentPage = await signIn(other, loginPage, user.email);
      expectPage(consentPage, 'consent');
      other.cookies.delete(SESSION_COOKIE);
      const reply = await other.post('/oauth/consent', { ...hiddenInputs(consentPage.body), scope: 'read:posts', decision: 'allow' });
      expect(reply.statusCode).toBe(303);
      expect(reply.headers.location).toBe(`/oauth/login?interaction=${hiddenInputs(consentPage.body).interaction}`);
    });
  });
});
