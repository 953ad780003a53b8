import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '../../../src/errors/registry.js';
import { passwordWork } from '../../../src/oauth/passwords.js';
import type { UserRecord } from '../../../src/storage/users.js';
import { startTestApp } from '../../helpers/app.js';
import { fillPasswordWork } from '../../helpers/password-work.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { createClient, type TestClient } from '../fixtures.js';
import { Browser, expectErrorPage, expectPage, hiddenInputs } from './browser.js';
import { countRows, createUser, expectTokenError, openFlowApp, PASSWORD, tokenRequest, type FlowApp } from './flow.js';

describe.each(DATABASE_KINDS)('password checks beyond what the process hashes at once, on %s', { timeout: 60_000 }, (kind) => {
  let t: FlowApp;
  let user: UserRecord;
  let legacy: TestClient;
  let filled: { release(): Promise<void> } | null = null;

  beforeAll(async () => {
    t = await openFlowApp(kind, { OAUTH_PASSWORD_GRANT: 'enabled' });
    user = await createUser(t.db);
    legacy = await createClient(t.db, { name: 'Legacy app', legacy: true, grantTypes: ['password'], scopes: ['read:posts'], role: null });
  });
  afterEach(async () => {
    await filled?.release();
    filled = null;
  });
  afterAll(() => t.close());

  const loginDecisions = () => t.oauth.decisions.filter((decision) => decision.operation === 'login').length;

  it('answers the login page with 503 and Retry-After, counting no failed sign-in, and signs in once hashing frees up', async () => {
    const browser = new Browser(t.oauth.app, '192.0.2.61');
    const page = await browser.visit('/oauth/login');
    const fields = hiddenInputs(page.body);
    const before = loginDecisions();
    filled = fillPasswordWork();
    // More than the sign-in throttle's 5 failures per account and address: none of them may count as one.
    for (let i = 0; i < 7; i++) {
      const refused = await browser.post('/oauth/login', { ...fields, email: user.email, password: `guess ${i}` });
      expectErrorPage(refused, 503, 'Temporarily unavailable', 'The service is temporarily unavailable.', 'Try again in a moment.');
      expect(refused.headers['retry-after']).toBe(String(UNAVAILABLE_RETRY_AFTER_SECONDS));
      expect(String(refused.headers['set-cookie'] ?? '')).not.toContain('portcullis-session');
    }
    expect(loginDecisions()).toBe(before);
    expect(await countRows(t.db, 'loginSessions')).toBe(0);
    await filled.release();
    filled = null;
    const again = await browser.visit('/oauth/login');
    expectPage(again, 'login');
    const signedIn = await browser.post('/oauth/login', { ...hiddenInputs(again.body), email: user.email, password: PASSWORD });
    expect({ status: signedIn.statusCode, location: signedIn.headers.location }).toEqual({ status: 303, location: '/oauth/account' });
  });

  it('answers the password grant with 503 temporarily_unavailable and Retry-After, and issues no token', async () => {
    filled = fillPasswordWork();
    const refused = await tokenRequest(t, legacy, { grant_type: 'password', username: user.email, password: PASSWORD });
    expectTokenError(refused, 503, 'temporarily_unavailable', 'Too many passwords are being checked at the moment; retry shortly.');
    expect(refused.headers['retry-after']).toBe(String(UNAVAILABLE_RETRY_AFTER_SECONDS));
    expect(await countRows(t.db, 'accessTokens')).toBe(0);
    await filled.release();
    filled = null;
    const granted = await tokenRequest(t, legacy, { grant_type: 'password', username: user.email, password: PASSWORD });
    expect(granted.statusCode).toBe(200);
  });

  it('refuses an unknown email alike, and checks the next unknown email once hashing frees up', async () => {
    filled = fillPasswordWork();
    const refused = await tokenRequest(t, legacy, { grant_type: 'password', username: 'nobody@example.com', password: 'whatever it is' });
    expectTokenError(refused, 503, 'temporarily_unavailable', 'Too many passwords are being checked at the moment; retry shortly.');
    await filled.release();
    filled = null;
    // The decoy hash an unknown email is checked against was refused with it: it is made again, not kept refused.
    const wrong = await tokenRequest(t, legacy, { grant_type: 'password', username: 'nobody@example.com', password: 'whatever it is' });
    expectTokenError(wrong, 400, 'invalid_grant', 'The username or password is wrong.');
  });
});

describe('the server', () => {
  it('hashes as many passwords at once as PASSWORD_HASH_CONCURRENCY says', async () => {
    const saved = passwordWork.concurrency;
    const t = await startTestApp('sqlite', { PASSWORD_HASH_CONCURRENCY: '3' });
    try {
      expect(passwordWork.concurrency).toBe(3);
    } finally {
      await t.close();
      passwordWork.concurrency = saved;
    }
  });
});
