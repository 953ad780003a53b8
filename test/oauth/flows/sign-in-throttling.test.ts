import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIGN_IN_LIMITS } from '../../../src/limits/sign-in-throttle.js';
import { hashPassword, passwordWork } from '../../../src/oauth/passwords.js';
import { updatePasswordHash, type UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { createClient } from '../fixtures.js';
import { form, FORM } from '../oauth-app.js';
import { Browser, expectPage, hiddenInputs, pageAlert, pageHeading, type Reply } from './browser.js';
import { countRows, createUser, expectTokenError, openFlowApp, PASSWORD, tokenRequest, type FlowApp } from './flow.js';

const WRONG = 'The email or password is wrong.';
const LOCKED = 'Too many failed sign-ins. Try again in 15 minutes.';
const DEVICE_COOKIE = '__Host-portcullis-device';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

function statuses(replies: readonly Reply[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const reply of replies) counts[reply.statusCode] = (counts[reply.statusCode] ?? 0) + 1;
  return counts;
}

/** The refusal of a locked account: the login form again, 429, Retry-After within the 15-minute window. */
function expectLocked(reply: Reply): void {
  expectPage(reply, 'login', 429);
  expect(pageAlert(reply.body)).toBe(LOCKED);
  expect(Number(reply.headers['retry-after'])).toBeGreaterThan(SIGN_IN_LIMITS.windowSeconds - 60);
  expect(Number(reply.headers['retry-after'])).toBeLessThanOrEqual(SIGN_IN_LIMITS.windowSeconds);
  expect(String(reply.headers['set-cookie'] ?? '')).not.toContain('portcullis-session');
}

// Every checked guess costs one scrypt (0.3 s alone, several seconds on a loaded machine).
describe.each(DATABASE_KINDS)('sign-in throttling on %s', { timeout: 90_000 }, (kind) => {
  let t: FlowApp;

  const hashesAtOnce = passwordWork.concurrency;
  beforeAll(async () => {
    t = await openFlowApp(kind, { OAUTH_PASSWORD_GRANT: 'enabled' });
    // The throttle is what this file tests: room for all of its concurrent checks at once (20 at most), so
    // that none is refused for want of a place to hash (password-hash-limit.test.ts tests that).
    passwordWork.concurrency = 4;
  });
  afterAll(async () => {
    passwordWork.concurrency = hashesAtOnce;
    await t.close();
  });

  /** A browser at `address` on the login page of the account page (no authorization request needed). */
  async function atLogin(address: string, browser = new Browser(t.oauth.app, address)): Promise<{ browser: Browser; fields: Record<string, string> }> {
    const page = await browser.visit('/oauth/login');
    expectPage(page, 'login');
    return { browser, fields: hiddenInputs(page.body) };
  }

  const denials = () => t.oauth.decisions.filter((decision) => decision.operation === 'login' && decision.decision === 'deny').length;

  describe('the login page', () => {
    it('lets at most 5 of 20 concurrent wrong passwords reach the password check, and refuses the right one while locked', async () => {
      const target = await createUser(t.db);
      const { browser, fields } = await atLogin('192.0.2.11');
      const before = denials();
      const guesses = await Promise.all(Array.from({ length: 20 }, (_, i) => browser.post('/oauth/login', { ...fields, email: target.email, password: `guess ${i}` })));
      expect(statuses(guesses)).toEqual({ 401: 5, 429: 15 });
      for (const reply of guesses.filter((r) => r.statusCode === 401)) expect(pageAlert(reply.body)).toBe(WRONG);
      for (const reply of guesses.filter((r) => r.statusCode === 429)) expectLocked(reply);
      // Only the five checked guesses were wrong passwords (each one a denial in the audit log).
      expect(denials() - before).toBe(5);
      const sessions = await countRows(t.db, 'loginSessions');
      expectLocked(await browser.post('/oauth/login', { ...fields, email: target.email, password: PASSWORD }));
      expect(await countRows(t.db, 'loginSessions')).toBe(sessions);
    });

    it('locks an account for one address only: its owner elsewhere still signs in', async () => {
      const target = await createUser(t.db);
      const attacker = await atLogin('192.0.2.12');
      await Promise.all(Array.from({ length: 6 }, (_, i) => attacker.browser.post('/oauth/login', { ...attacker.fields, email: target.email, password: `guess ${i}` })));
      expectLocked(await attacker.browser.post('/oauth/login', { ...attacker.fields, email: target.email, password: PASSWORD }));
      const owner = await atLogin('198.51.100.12');
      const signedIn = await owner.browser.post('/oauth/login', { ...owner.fields, email: target.email, password: PASSWORD });
      expect({ status: signedIn.statusCode, location: signedIn.headers.location }).toEqual({ status: 303, location: '/oauth/account' });
    });

    it('marks the browser that signed in as a known device with an HttpOnly __Host- cookie', async () => {
      const owner = await createUser(t.db);
      const { browser, fields } = await atLogin('192.0.2.13');
      const wrong = await browser.post('/oauth/login', { ...fields, email: owner.email, password: 'not it' });
      expect(String(wrong.headers['set-cookie'] ?? '')).not.toContain('portcullis-device');
      const reply = await browser.post('/oauth/login', { ...fields, email: owner.email, password: PASSWORD });
      expect(reply.statusCode).toBe(303);
      const setCookies = [reply.headers['set-cookie']].flat().map(String);
      const device = setCookies.find((cookie) => cookie.startsWith(`${DEVICE_COOKIE}=`));
      expect(device).toMatch(new RegExp(`^${DEVICE_COOKIE}=[A-Za-z0-9_-]{73}; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=7776000$`));
    });

    describe('while an attacker hammers one account from many addresses', () => {
      let victim: UserRecord;
      let known: Browser;
      const victimAddress = '203.0.113.50';

      beforeAll(async () => {
        victim = await createUser(t.db);
        // The victim signed in from this browser before.
        const { browser, fields } = await atLogin(victimAddress);
        expect((await browser.post('/oauth/login', { ...fields, email: victim.email, password: PASSWORD })).statusCode).toBe(303);
        known = browser;
        // 6 guesses from each of 5 addresses: the account's limit over all addresses (20) is reached.
        const before = denials();
        const attacks = await Promise.all(
          Array.from({ length: 5 }, async (_, a) => {
            const attacker = await atLogin(`198.51.100.${100 + a}`);
            return Promise.all(Array.from({ length: 6 }, (_, i) => attacker.browser.post('/oauth/login', { ...attacker.fields, email: victim.email, password: `guess ${a}-${i}` })));
          }),
        );
        expect(statuses(attacks.flat())).toEqual({ 401: SIGN_IN_LIMITS.account, 429: 30 - SIGN_IN_LIMITS.account });
        expect(denials() - before).toBe(SIGN_IN_LIMITS.account);
      }, 120_000);

      it('throttles the attacker, from a new address and with the right password too', async () => {
        const fresh = await atLogin('198.51.100.200');
        expectLocked(await fresh.browser.post('/oauth/login', { ...fresh.fields, email: victim.email, password: 'another guess' }));
        expectLocked(await fresh.browser.post('/oauth/login', { ...fresh.fields, email: victim.email.toUpperCase(), password: PASSWORD }));
        // The password grant has no browser, so no known device: it is locked too.
        const legacy = await createClient(t.db, { name: 'Legacy app', legacy: true, grantTypes: ['password'], scopes: ['read:posts'], role: null });
        const grant = await tokenRequest(t, legacy, { grant_type: 'password', username: victim.email, password: PASSWORD });
        expect(grant.json()).toEqual({ error: 'invalid_grant', error_description: `Too many failed sign-ins; retry in ${grant.headers['retry-after']} s.` });
      });

      it('lets the victim sign in from the browser it signed in from before', async () => {
        const { fields } = await atLogin(victimAddress, known);
        const reply = await known.post('/oauth/login', { ...fields, email: victim.email, password: PASSWORD });
        expect({ status: reply.statusCode, location: reply.headers.location }).toEqual({ status: 303, location: '/oauth/account' });
        expect(pageHeading((await known.follow(reply)).body)).toBe('Your account');
      });

      it('refuses the victim in a browser without the cookie, or with a tampered one, or with one of another account', async () => {
        const { browser, fields } = await atLogin(victimAddress);
        expectLocked(await browser.post('/oauth/login', { ...fields, email: victim.email, password: PASSWORD }));
        const cookie = known.cookies.get(DEVICE_COOKIE)!;
        browser.cookies.set(DEVICE_COOKIE, `${cookie.slice(0, -1)}${cookie.endsWith('A') ? 'B' : 'A'}`);
        expectLocked(await browser.post('/oauth/login', { ...fields, email: victim.email, password: PASSWORD }));
        // The cookie a browser got for its own account proves nothing for the victim's.
        const other = await createUser(t.db);
        const attacker = await atLogin('198.51.100.210');
        expect((await attacker.browser.post('/oauth/login', { ...attacker.fields, email: other.email, password: PASSWORD })).statusCode).toBe(303);
        expect(attacker.browser.cookies.get(DEVICE_COOKIE)).toMatch(/^[A-Za-z0-9_-]{73}$/);
        const again = await atLogin('198.51.100.210', attacker.browser);
        expectLocked(await attacker.browser.post('/oauth/login', { ...again.fields, email: victim.email, password: PASSWORD }));
      });

      it('still holds the known device to its own limit of 5 failures per account and address', async () => {
        const browser = new Browser(t.oauth.app, '203.0.113.51');
        browser.cookies.set(DEVICE_COOKIE, known.cookies.get(DEVICE_COOKIE)!);
        const { fields } = await atLogin('203.0.113.51', browser);
        const guesses = await Promise.all(Array.from({ length: 8 }, (_, i) => browser.post('/oauth/login', { ...fields, email: victim.email, password: `typo ${i}` })));
        expect(statuses(guesses)).toEqual({ 401: 5, 429: 3 });
        expectLocked(await browser.post('/oauth/login', { ...fields, email: victim.email, password: PASSWORD }));
      });

      // Last: it changes the victim's password.
      it('stops recognizing the cookie once the password changes: someone who knew the old one gets no device budget', async () => {
        const next = 'the victim has a new password now';
        await updatePasswordHash(t.db.kysely, victim.id, await hashPassword(next), new Date().toISOString());
        const browser = new Browser(t.oauth.app, '203.0.113.52');
        browser.cookies.set(DEVICE_COOKIE, known.cookies.get(DEVICE_COOKIE)!);
        const { fields } = await atLogin('203.0.113.52', browser);
        expectLocked(await browser.post('/oauth/login', { ...fields, email: victim.email, password: next }));
      });
    });
  });

  it('the password grant lets at most 5 of 20 concurrent wrong passwords reach the check', async () => {
    const target = await createUser(t.db);
    const legacy = await createClient(t.db, { name: 'Legacy app', legacy: true, grantTypes: ['password'], scopes: ['read:posts'], role: null });
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => tokenRequest(t, legacy, { grant_type: 'password', username: target.email, password: `guess ${i}` })));
    const descriptions = replies.map((reply) => (reply.json() as { error_description: string }).error_description);
    expect(descriptions.filter((d) => d === 'The username or password is wrong.').length).toBe(5);
    expect(descriptions.filter((d) => /^Too many failed sign-ins; retry in \d+ s\.$/.test(d)).length).toBe(15);
    const refused = await tokenRequest(t, legacy, { grant_type: 'password', username: target.email, password: PASSWORD });
    expectTokenError(refused, 400, 'invalid_grant', `Too many failed sign-ins; retry in ${refused.headers['retry-after']} s.`);
    expect(await countRows(t.db, 'accessTokens')).toBe(0);
  });

  it('the account page lets at most 5 of 12 concurrent wrong current passwords reach the check', async () => {
    const owner = await createUser(t.db);
    const { browser, fields } = await atLogin('192.0.2.14');
    expect((await browser.post('/oauth/login', { ...fields, email: owner.email, password: PASSWORD })).statusCode).toBe(303);
    const page = await browser.get('/oauth/account');
    const start = page.body.indexOf('action="/oauth/account/password"');
    const csrf = hiddenInputs(page.body.slice(start, page.body.indexOf('</form>', start))).csrf_token!;
    const change = (current: string) => browser.post('/oauth/account/password', { csrf_token: csrf, current_password: current, new_password: 'a brand new passphrase 42' });
    const replies = await Promise.all(Array.from({ length: 12 }, (_, i) => change(`guess ${i}`)));
    expect(statuses(replies)).toEqual({ 400: 5, 429: 7 });
    for (const reply of replies) {
      expect(pageAlert(reply.body)).toBe(reply.statusCode === 400 ? 'The current password is wrong.' : 'Too many wrong passwords; try again later.');
    }
    const refused = await change(PASSWORD);
    expect({ status: refused.statusCode, alert: pageAlert(refused.body), retryAfter: Number(refused.headers['retry-after']) > 0 }).toEqual({
      status: 429,
      alert: 'Too many wrong passwords; try again later.',
      retryAfter: true,
    });
  });

  it('the device page lets at most 30 of 40 concurrent wrong user codes from one address reach the lookup', async () => {
    const tv = await createClient(t.db, { name: 'TV', type: 'public', secretHash: null, grantTypes: [DEVICE_GRANT], scopes: ['read:posts'], role: null });
    const started = await t.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: FORM, payload: form({ client_id: tv.client.clientId, scope: 'read:posts' }) });
    const userCode = (started.json() as { user_code: string }).user_code;
    const guesser = new Browser(t.oauth.app, '192.0.2.15');
    const replies = await Promise.all(Array.from({ length: 40 }, () => guesser.get('/oauth/device?user_code=BCDF-BCDF')));
    expect(statuses(replies)).toEqual({ 400: 30, 429: 10 });
    for (const reply of replies) {
      expect(pageAlert(reply.body)).toMatch(reply.statusCode === 400 ? /^That code is not valid or has expired\./ : /^Too many wrong codes\. Try again in 15 minutes\.$/);
    }
    const right = await guesser.get(`/oauth/device?user_code=${userCode}`);
    expect({ status: right.statusCode, retryAfter: Number(right.headers['retry-after']) > 0 }).toEqual({ status: 429, retryAfter: true });
    // A right code gives its reservation back: another address enters right codes without spending anything.
    const owner = new Browser(t.oauth.app, '192.0.2.16');
    for (let i = 0; i < 35; i++) expect((await owner.get(`/oauth/device?user_code=${userCode}`)).statusCode).toBe(303);
  });
});
