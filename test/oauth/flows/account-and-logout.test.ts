import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CsrfTokens } from '../../../src/oauth/browser/csrf.js';
import { hashPassword, verifyPassword } from '../../../src/oauth/passwords.js';
import { tokenLookupKey } from '../../../src/oauth/secrets.js';
import { verifyUserCredentials } from '../../../src/oauth/user-credentials.js';
import { nowIso } from '../../../src/storage/ids.js';
import { revokeUserTokens } from '../../../src/oauth/tokens/access-token-records.js';
import { updatePasswordHash, type UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import type { TestClient } from '../fixtures.js';
import { basic, form, FORM } from '../oauth-app.js';
import { Browser, expectErrorPage, expectPageHeaders, hiddenInputs, pageAlert, pageHeading } from './browser.js';
import { createUser, createWebClient, exchangeCode, expectTokenError, expectTokens, obtainCode, openFlowApp, PASSWORD, refresh, REDIRECT_URI, type FlowApp } from './flow.js';

const NEW_PASSWORD = 'a brand new passphrase 42';

/** The hidden inputs of the page's form posting to `action` (the account page has several). */
function formFields(body: string, action: string): Record<string, string> {
  const start = body.indexOf(`action="${action}"`);
  expect(start, action).toBeGreaterThan(0);
  return hiddenInputs(body.slice(start, body.indexOf('</form>', start)));
}

describe.each(DATABASE_KINDS)('account page and sign-out on %s', (kind) => {
  let app: FlowApp;
  let web: TestClient;

  beforeAll(async () => {
    app = await openFlowApp(kind);
    web = await createWebClient(app.db, { postLogoutRedirectUris: ['https://app.example/signed-out'] });
  });
  afterAll(() => app.close());

  /** A signed-in browser holding the user's tokens for the web client. */
  async function signedInWithTokens(user: UserRecord, scope = 'openid offline_access read:posts') {
    const browser = new Browser(app.oauth.app);
    const { code, verifier } = await obtainCode(app, browser, web, user, { scope });
    const tokens = expectTokens(await exchangeCode(app, web, code, { code_verifier: verifier }), { scope, refreshToken: true, idToken: scope.includes('openid') });
    return { browser, tokens };
  }

  const tokenWorks = async (token: string) => {
    try {
      await app.oauth.tokens.verifyAccessToken(token);
      return true;
    } catch {
      return false;
    }
  };

  it('shows the account to its user only, listing the applications they allowed', async () => {
    const user = await createUser(app.db);
    const anonymous = await new Browser(app.oauth.app).get('/oauth/account');
    expect({ status: anonymous.statusCode, location: anonymous.headers.location }).toEqual({ status: 303, location: '/oauth/login' });
    const { browser } = await signedInWithTokens(user);
    const page = await browser.get('/oauth/account');
    expect({ status: page.statusCode, heading: pageHeading(page.body) }).toEqual({ status: 200, heading: 'Your account' });
    expectPageHeaders(page);
    expect(page.body).toContain(`Signed in as <strong>${user.email}</strong>`);
    expect(page.body).toContain('<td>Example Web App</td><td>offline_access openid read:posts</td>');
    for (const label of ['Current password', 'New password (at least 12 characters)', 'New email address (you sign in with it)']) expect(page.body).toContain(`>${label}</label>`);
  });

  it('changes the password with the current one, ending every other session, token and refresh family', async () => {
    const user = await createUser(app.db);
    const { browser, tokens } = await signedInWithTokens(user);
    const elsewhere = await signedInWithTokens(user);
    const page = await browser.get('/oauth/account');
    const fields = formFields(page.body, '/oauth/account/password');

    const wrong = await browser.post('/oauth/account/password', { csrf_token: fields.csrf_token!, current_password: 'not my password!', new_password: NEW_PASSWORD });
    expect({ status: wrong.statusCode, alert: pageAlert(wrong.body) }).toEqual({ status: 400, alert: 'The current password is wrong.' });
    const short = await browser.post('/oauth/account/password', { csrf_token: fields.csrf_token!, current_password: PASSWORD, new_password: 'short' });
    expect({ status: short.statusCode, alert: pageAlert(short.body) }).toEqual({ status: 400, alert: 'The new password must have 12 to 256 characters and no control characters.' });
    const forged = await browser.post('/oauth/account/password', { current_password: PASSWORD, new_password: NEW_PASSWORD });
    expect(forged.statusCode).toBe(403);
    expect(await tokenWorks(tokens.access_token)).toBe(true);

    const changed = await browser.post('/oauth/account/password', { csrf_token: fields.csrf_token!, current_password: PASSWORD, new_password: NEW_PASSWORD });
    expect({ status: changed.statusCode, notice: /<p class="notice" role="status">([^<]*)</.exec(changed.body)?.[1] }).toEqual({
      status: 200,
      notice: 'Your password was changed. Other devices and applications were signed out.',
    });
    const stored = await app.db.kysely.selectFrom('users').select('passwordHash').where('id', '=', user.id).executeTakeFirstOrThrow();
    expect(await verifyPassword(NEW_PASSWORD, stored.passwordHash)).toBe(true);
    expect(await tokenWorks(tokens.access_token)).toBe(false);
    expect(await tokenWorks(elsewhere.tokens.access_token)).toBe(false);
    expectTokenError(await refresh(app, web, tokens.refresh_token!), 400, 'invalid_grant', 'The refresh token was revoked.');
    // The other browser's session ended; this one got a fresh session and stays signed in.
    expect((await elsewhere.browser.get('/oauth/account')).statusCode).toBe(303);
    expect((await browser.get('/oauth/account')).statusCode).toBe(200);
    // Five password checks and a new hash, each a deliberately slow scrypt.
  }, 90_000);

  it('changes the sign-in email with the current password; another account\'s email is refused', async () => {
    const user = await createUser(app.db);
    const other = await createUser(app.db);
    const { browser, tokens } = await signedInWithTokens(user);
    const fields = formFields((await browser.get('/oauth/account')).body, '/oauth/account/email');
    const change = (values: Record<string, string>) => browser.post('/oauth/account/email', values);
    const moved = `moved-${user.id}@example.com`;
    const alert = (reply: Awaited<ReturnType<typeof change>>) => ({ status: reply.statusCode, alert: pageAlert(reply.body) });

    expect(alert(await change({ csrf_token: fields.csrf_token!, current_password: 'not my password!', new_email: moved }))).toEqual({ status: 400, alert: 'The current password is wrong.' });
    for (const invalid of ['not an email', `${'a'.repeat(250)}@example.com`, '']) {
      expect(alert(await change({ csrf_token: fields.csrf_token!, current_password: PASSWORD, new_email: invalid }))).toEqual({
        status: 400,
        alert: 'The new email address is not a valid address (at most 254 characters).',
      });
    }
    expect(alert(await change({ csrf_token: fields.csrf_token!, current_password: PASSWORD, new_email: other.email }))).toEqual({ status: 409, alert: 'Another account uses that email address.' });
    // Without the form's token (a cross-site post): refused, nothing changes.
    expect((await change({ current_password: PASSWORD, new_email: moved })).statusCode).toBe(403);
    // The password form's token is not this form's.
    const passwordForm = formFields((await browser.get('/oauth/account')).body, '/oauth/account/password');
    expect((await change({ csrf_token: passwordForm.csrf_token!, current_password: PASSWORD, new_email: moved })).statusCode).toBe(403);
    expect(await app.db.kysely.selectFrom('users').select('email').where('id', '=', user.id).executeTakeFirstOrThrow()).toEqual({ email: user.email });

    const changed = await change({ csrf_token: fields.csrf_token!, current_password: PASSWORD, new_email: moved });
    expect({ status: changed.statusCode, notice: /<p class="notice" role="status">([^<]*)</.exec(changed.body)?.[1], shown: changed.body.includes(`Signed in as <strong>${moved}</strong>`) }).toEqual({
      status: 200,
      notice: `You now sign in as ${moved}.`,
      shown: true,
    });
    // This browser stays a known device of the account under its new email.
    expect(String(changed.headers['set-cookie'] ?? '')).toMatch(/portcullis-device=[^;]+;/);
    expect(await verifyUserCredentials(app.db.kysely, moved, PASSWORD)).toMatchObject({ id: user.id, email: moved });
    expect(await verifyUserCredentials(app.db.kysely, user.email, PASSWORD)).toBeNull();
    // The account's sessions and tokens go on: the credentials did not change.
    expect(await tokenWorks(tokens.access_token)).toBe(true);
    // Recorded as the user's: the wrong password (a denial), the address another account has, the change.
    const own = { requestId: expect.any(String), interface: 'oauth', subject: user.id, clientId: null, resourceType: 'user', resourceId: user.id };
    expect(app.oauth.decisions.filter((d) => d.subject === user.id && d.operation.startsWith('account.'))).toEqual([
      { ...own, operation: 'account.password_check', decision: 'deny', reason: 'authentication' },
      { ...own, operation: 'account.email_taken', decision: 'allow', reason: 'authenticated' },
      { ...own, operation: 'account.email', decision: 'allow', reason: 'authenticated' },
    ]);
  }, 90_000);

  it('withdraws consent for one application, ending its tokens, and asks again next time', async () => {
    const user = await createUser(app.db);
    const { browser, tokens } = await signedInWithTokens(user);
    const page = await browser.get('/oauth/account');
    const fields = formFields(page.body, '/oauth/account/applications/revoke');
    expect(fields.application).toBe(web.client.id);
    const done = await browser.post('/oauth/account/applications/revoke', { csrf_token: fields.csrf_token!, application: fields.application! });
    expect(done.body).toContain('The application no longer has access.');
    expect(done.body).toContain('<p>None.</p>');
    expect(await tokenWorks(tokens.access_token)).toBe(false);
    expectTokenError(await refresh(app, web, tokens.refresh_token!), 400, 'invalid_grant', 'The refresh token was revoked.');
    const again = await browser.visit(`/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: web.client.clientId, redirect_uri: REDIRECT_URI, scope: 'read:posts', state: 's', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' })}`);
    expect(pageHeading(again.body)).toBe('Allow Example Web App access?');
  });

  /** The account page's applications as (name, scopes) pairs, in page order. */
  const listedApplications = (body: string) => [...body.matchAll(/<tr><td>([^<]*)<\/td><td>([^<]*)<\/td><td>\d{4}-\d{2}-\d{2}<\/td>/g)].map((match) => [match[1], match[2]]);

  it('lists an application that skipped consent (first party) and withdraws it: its tokens, refresh family and unredeemed codes end', async () => {
    const user = await createUser(app.db);
    const consoleApp = await createWebClient(app.db, { name: 'Portcullis Console', firstParty: true });
    const browser = new Browser(app.oauth.app);
    const { code, verifier } = await obtainCode(app, browser, consoleApp, user, { scope: 'offline_access read:posts' });
    const tokens = expectTokens(await exchangeCode(app, consoleApp, code, { code_verifier: verifier }), { scope: 'offline_access read:posts', refreshToken: true, idToken: false });
    // A second code, not redeemed yet when the user withdraws the application.
    const pending = await obtainCode(app, browser, consoleApp, user, { scope: 'read:posts' });
    expect(await app.db.kysely.selectFrom('consents').select('clientId').where('userId', '=', user.id).execute()).toEqual([]);
    const page = await browser.get('/oauth/account');
    expect(listedApplications(page.body)).toEqual([['Portcullis Console', 'offline_access read:posts']]);
    const fields = formFields(page.body, '/oauth/account/applications/revoke');
    expect(fields.application).toBe(consoleApp.client.id);
    const done = await browser.post('/oauth/account/applications/revoke', { csrf_token: fields.csrf_token!, application: fields.application! });
    expect({ status: done.statusCode, notice: /<p class="notice" role="status">([^<]*)</.exec(done.body)?.[1], listed: listedApplications(done.body) }).toEqual({
      status: 200,
      notice: 'The application no longer has access.',
      listed: [],
    });
    expect(await tokenWorks(tokens.access_token)).toBe(false);
    expectTokenError(await refresh(app, consoleApp, tokens.refresh_token!), 400, 'invalid_grant', 'The refresh token was revoked.');
    expectTokenError(await exchangeCode(app, consoleApp, pending.code, { code_verifier: pending.verifier }), 400, 'invalid_grant', "This code was withdrawn before it was exchanged (the user's grants were ended); start the authorization again.");
  });

  it('lists an application holding only a live access token, and none whose tokens all expired or were revoked', async () => {
    const user = await createUser(app.db);
    const reader = await createWebClient(app.db, { name: 'Reader', firstParty: true, grantTypes: ['authorization_code'] });
    const browser = new Browser(app.oauth.app);
    const { code, verifier } = await obtainCode(app, browser, reader, user, { scope: 'read:posts' });
    const tokens = expectTokens(await exchangeCode(app, reader, code, { code_verifier: verifier }), { scope: 'read:posts', refreshToken: false, idToken: false });
    expect(listedApplications((await browser.get('/oauth/account')).body)).toEqual([['Reader', 'read:posts']]);
    const { jti } = await app.oauth.tokens.verifyAccessToken(tokens.access_token);
    await app.db.kysely.updateTable('accessTokens').set({ expiresAt: new Date(Date.now() - 1000).toISOString() }).where('jti', '=', jti).execute();
    expect(listedApplications((await browser.get('/oauth/account')).body)).toEqual([]);
    // An application the page does not list cannot be "withdrawn": nothing is revoked or recorded.
    const before = app.oauth.decisions.length;
    const invalidations = await app.db.kysely.selectFrom('invalidations').select('seq').execute();
    const csrf = new CsrfTokens(app.config.keyEncryptionSecret).issue(browser.cookies.get('__Host-portcullis-browser')!, 'account:revoke');
    const nothing = await browser.post('/oauth/account/applications/revoke', { csrf_token: csrf, application: reader.client.id });
    expect({ status: nothing.statusCode, notice: /<p class="notice"/.test(nothing.body) }).toEqual({ status: 200, notice: false });
    expect(app.oauth.decisions.length).toBe(before);
    expect(await app.db.kysely.selectFrom('invalidations').select('seq').execute()).toHaveLength(invalidations.length);
  });

  it('signs out everywhere: every session and token of the user ends', async () => {
    const user = await createUser(app.db);
    const { browser, tokens } = await signedInWithTokens(user);
    const other = await signedInWithTokens(user);
    const page = await browser.get('/oauth/account');
    const fields = formFields(page.body, '/oauth/account/sign-out-everywhere');
    const done = await browser.post('/oauth/account/sign-out-everywhere', { csrf_token: fields.csrf_token! });
    expect({ status: done.statusCode, heading: pageHeading(done.body) }).toEqual({ status: 200, heading: 'Signed out' });
    expect(done.headers['set-cookie']).toEqual(['__Host-portcullis-session=; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=0']);
    expect(await tokenWorks(tokens.access_token)).toBe(false);
    expect(await tokenWorks(other.tokens.access_token)).toBe(false);
    expect((await other.browser.get('/oauth/account')).statusCode).toBe(303);
  });

  it('ends what was granted but not yet redeemed too: a code obtained before signing out everywhere is refused after', async () => {
    const user = await createUser(app.db);
    const { browser } = await signedInWithTokens(user);
    const pending = await obtainCode(app, browser, web, user, { scope: 'openid offline_access read:posts' });
    const page = await browser.get('/oauth/account');
    const fields = formFields(page.body, '/oauth/account/sign-out-everywhere');
    await browser.post('/oauth/account/sign-out-everywhere', { csrf_token: fields.csrf_token! });
    const late = await exchangeCode(app, web, pending.code, { code_verifier: pending.verifier });
    expectTokenError(late, 400, 'invalid_grant', "This code was withdrawn before it was exchanged (the user's grants were ended); start the authorization again.");
  });

  it('logs out on the RP\'s request (RP-Initiated Logout 1.0) after the user confirms, back to a registered URI with state', async () => {
    const user = await createUser(app.db);
    const { browser, tokens } = await signedInWithTokens(user);
    const query = new URLSearchParams({ id_token_hint: tokens.id_token!, post_logout_redirect_uri: 'https://app.example/signed-out', state: 'bye' });
    const confirm = await browser.get(`/oauth/logout?${query}`);
    expect({ status: confirm.statusCode, heading: pageHeading(confirm.body) }).toEqual({ status: 200, heading: 'Sign out?' });
    expect(confirm.headers['content-security-policy']).toContain("form-action 'self' https://app.example;");
    const fields = hiddenInputs(confirm.body);
    expect(fields).toEqual({ csrf_token: expect.any(String), client_id: web.client.clientId, post_logout_redirect_uri: 'https://app.example/signed-out', state: 'bye' });
    const done = await browser.post('/oauth/logout', fields);
    expect({ status: done.statusCode, location: done.headers.location }).toEqual({ status: 303, location: 'https://app.example/signed-out?state=bye' });
    expect((await browser.get('/oauth/account')).statusCode).toBe(303);
  });

  it('refuses an unregistered post_logout_redirect_uri, a forged id_token_hint and a logout without its form token', async () => {
    const user = await createUser(app.db);
    const { browser, tokens } = await signedInWithTokens(user);
    const unregistered = await browser.get(`/oauth/logout?${new URLSearchParams({ id_token_hint: tokens.id_token!, post_logout_redirect_uri: 'https://evil.example/' })}`);
    expect({ status: unregistered.statusCode, alert: pageAlert(unregistered.body), location: unregistered.headers.location }).toEqual({
      status: 400,
      alert: 'The post_logout_redirect_uri is not registered for this application.',
      location: undefined,
    });
    const [header, payload] = tokens.id_token!.split('.');
    const forged = await browser.get(`/oauth/logout?${new URLSearchParams({ id_token_hint: `${header}.${payload}.AAAA`, post_logout_redirect_uri: 'https://app.example/signed-out' })}`);
    expect(pageAlert(forged.body)).toBe('The id_token_hint was not issued by this server.');
    const noToken = await browser.post('/oauth/logout', { csrf_token: 'forged' });
    expect(noToken.statusCode).toBe(403);
    expect((await browser.get('/oauth/account')).statusCode).toBe(200);
  });

  it('refuses a post_logout_redirect_uri without id_token_hint or client_id, saying that one of them is needed', async () => {
    const user = await createUser(app.db);
    const { browser } = await signedInWithTokens(user);
    const unnamed = await browser.get(`/oauth/logout?${new URLSearchParams({ post_logout_redirect_uri: 'https://app.example/signed-out', state: 'bye' })}`);
    expectErrorPage(unnamed, 400, 'Invalid sign-out request', 'A post_logout_redirect_uri needs id_token_hint or client_id to name the application it belongs to.');
    // Named by client_id, the same URI is checked against the registration and accepted.
    const named = await browser.get(`/oauth/logout?${new URLSearchParams({ client_id: web.client.clientId, post_logout_redirect_uri: 'https://app.example/signed-out' })}`);
    expect({ status: named.statusCode, heading: pageHeading(named.body) }).toEqual({ status: 200, heading: 'Sign out?' });
    const elsewhere = await browser.get(`/oauth/logout?${new URLSearchParams({ client_id: web.client.clientId, post_logout_redirect_uri: 'https://evil.example/' })}`);
    expectErrorPage(elsewhere, 400, 'Invalid sign-out request', 'The post_logout_redirect_uri is not registered for this application.');
    expect((await browser.get('/oauth/account')).statusCode).toBe(200);
  });
});

// The current password takes a slow hash to check: a change made meanwhile elsewhere (the password changed
// in another browser, signing out everywhere) must win over the form that was checked before it.
describe.each(DATABASE_KINDS)('account changes racing another change on %s', (kind) => {
  let app: FlowApp;
  let web: TestClient;
  let meanwhile: (() => Promise<void>) | null = null;

  beforeAll(async () => {
    app = await openFlowApp(kind, {}, { beforeAccountChange: async () => meanwhile?.() });
    web = await createWebClient(app.db);
  });
  afterAll(() => app.close());

  /** The victim changes the password elsewhere, ending every session, as the password form does. */
  const passwordChangedElsewhere = (user: UserRecord) => async () => {
    const now = nowIso();
    const passwordHash = await hashPassword(NEW_PASSWORD);
    await app.db.kysely.transaction().execute(async (trx) => {
      await updatePasswordHash(trx, user.id, passwordHash, now);
      await revokeUserTokens(trx, user.id, now);
    });
  };

  async function onAccountPage(user: UserRecord, form: string) {
    const browser = new Browser(app.oauth.app);
    await obtainCode(app, browser, web, user, { scope: 'read:posts' });
    return { browser, fields: formFields((await browser.get('/oauth/account')).body, form) };
  }

  it('leaves a new version of the user with each change, even within the millisecond of the one before', async () => {
    const user = await createUser(app.db);
    const { browser, fields } = await onAccountPage(user, '/oauth/account/email');
    // A version later than the clock: a change in the same millisecond as it is what must still move it, so
    // that a PUT of the user that read it finds the user changed instead of writing over the change.
    const read = new Date(Date.now() + 60_000).toISOString();
    await app.db.kysely.updateTable('users').set({ updatedAt: read }).where('id', '=', user.id).execute();
    const version = async () => (await app.db.kysely.selectFrom('users').select('updatedAt').where('id', '=', user.id).executeTakeFirstOrThrow()).updatedAt;
    const moved = await browser.post('/oauth/account/email', { csrf_token: fields.csrf_token!, current_password: PASSWORD, new_email: `versioned-${user.id}@example.com` });
    expect(moved.statusCode).toBe(200);
    expect(await version()).toBe(new Date(Date.parse(read) + 1).toISOString());
    const passwordFields = formFields((await browser.get('/oauth/account')).body, '/oauth/account/password');
    const changed = await browser.post('/oauth/account/password', { csrf_token: passwordFields.csrf_token!, current_password: PASSWORD, new_password: NEW_PASSWORD });
    expect(changed.statusCode).toBe(200);
    expect(await version()).toBe(new Date(Date.parse(read) + 2).toISOString());
  }, 90_000);

  it('refuses an email change whose password check an elsewhere password change overtook: nothing changes', async () => {
    const user = await createUser(app.db);
    const { browser, fields } = await onAccountPage(user, '/oauth/account/email');
    meanwhile = passwordChangedElsewhere(user);
    try {
      const reply = await browser.post('/oauth/account/email', { csrf_token: fields.csrf_token!, current_password: PASSWORD, new_email: `taken-over-${user.id}@example.com` });
      expect({ status: reply.statusCode, heading: pageHeading(reply.body) }).toEqual({ status: 403, heading: 'Form expired' });
    } finally {
      meanwhile = null;
    }
    expect(await app.db.kysely.selectFrom('users').select('email').where('id', '=', user.id).executeTakeFirstOrThrow()).toEqual({ email: user.email });
    // The proved password whose change was refused leaves a trace.
    expect(app.oauth.decisions.filter((d) => d.subject === user.id && d.operation.startsWith('account.'))).toEqual([
      expect.objectContaining({ operation: 'account.email', decision: 'deny', reason: 'authentication' }),
    ]);
  }, 90_000);

  it('refuses a password change that an elsewhere password change overtook: the newer password stays, no session is started', async () => {
    const user = await createUser(app.db);
    const { browser, fields } = await onAccountPage(user, '/oauth/account/password');
    meanwhile = passwordChangedElsewhere(user);
    try {
      const reply = await browser.post('/oauth/account/password', { csrf_token: fields.csrf_token!, current_password: PASSWORD, new_password: 'the-attackers-password-1' });
      expect({ status: reply.statusCode, heading: pageHeading(reply.body), cookie: reply.headers['set-cookie'] }).toEqual({ status: 403, heading: 'Form expired', cookie: undefined });
    } finally {
      meanwhile = null;
    }
    const stored = await app.db.kysely.selectFrom('users').select('passwordHash').where('id', '=', user.id).executeTakeFirstOrThrow();
    expect(await verifyPassword(NEW_PASSWORD, stored.passwordHash)).toBe(true);
    expect((await browser.get('/oauth/account')).statusCode).toBe(303);
    expect(app.oauth.decisions.filter((d) => d.subject === user.id && d.operation.startsWith('account.'))).toEqual([
      expect.objectContaining({ operation: 'account.password', decision: 'deny', reason: 'authentication' }),
    ]);
  }, 90_000);

  it('refuses an email change once the session it was made in has ended (signed out everywhere meanwhile)', async () => {
    const user = await createUser(app.db);
    const { browser, fields } = await onAccountPage(user, '/oauth/account/email');
    meanwhile = async () => {
      await app.db.kysely.transaction().execute((trx) => revokeUserTokens(trx, user.id, nowIso()));
    };
    try {
      const reply = await browser.post('/oauth/account/email', { csrf_token: fields.csrf_token!, current_password: PASSWORD, new_email: `late-${user.id}@example.com` });
      expect({ status: reply.statusCode, heading: pageHeading(reply.body) }).toEqual({ status: 403, heading: 'Form expired' });
    } finally {
      meanwhile = null;
    }
    expect(await app.db.kysely.selectFrom('users').select('email').where('id', '=', user.id).executeTakeFirstOrThrow()).toEqual({ email: user.email });
  }, 90_000);
});

describe.each(DATABASE_KINDS)('userinfo, introspection and revocation of refresh tokens on %s', (kind) => {
  let app: FlowApp;
  let web: TestClient;
  let user: UserRecord;

  beforeAll(async () => {
    app = await openFlowApp(kind);
    web = await createWebClient(app.db, { scopes: ['openid', 'profile', 'email', 'offline_access', 'read:posts'] });
    user = await createUser(app.db, { name: 'Ada Lovelace' });
  });
  afterAll(() => app.close());

  async function tokensFor(scope: string) {
    const { code, verifier } = await obtainCode(app, new Browser(app.oauth.app), web, user, { scope });
    // A refresh token comes with offline_access, or without OpenID Connect at all.
    const refreshToken = scope.includes('offline_access') || !scope.includes('openid');
    return expectTokens(await exchangeCode(app, web, code, { code_verifier: verifier }), { scope, refreshToken, idToken: scope.includes('openid') });
  }

  const userinfo = (token: string, method: 'GET' | 'POST' = 'GET') => app.oauth.app.inject({ method, url: '/oauth/userinfo', headers: { authorization: `Bearer ${token}` } });
  const introspect = (token: string, client: TestClient = web, hint?: string) =>
    app.oauth.app.inject({ method: 'POST', url: '/oauth/introspect', headers: { ...FORM, authorization: basic(client.client.clientId, client.secret) }, payload: form({ token, ...(hint ? { token_type_hint: hint } : {}) }) });

  it('returns sub plus the claims of the granted scopes, never cached', async () => {
    const all = await tokensFor('openid profile email read:posts');
    for (const method of ['GET', 'POST'] as const) {
      const reply = await userinfo(all.access_token, method);
      expect({ status: reply.statusCode, body: reply.json(), cache: reply.headers['cache-control'] }).toEqual({
        status: 200,
        body: { sub: user.id, name: 'Ada Lovelace', email: user.email, email_verified: false },
        cache: 'no-store',
      });
    }
    const bare = await tokensFor('openid read:posts');
    expect((await userinfo(bare.access_token)).json()).toEqual({ sub: user.id });
    // Each answer is a decision in the audit log, like an API request's.
    const granted = { requestId: expect.any(String), interface: 'oauth', operation: 'userinfo', resourceType: 'user', sourceAddress: '127.0.0.1' };
    expect(app.oauth.decisions.filter((d) => d.operation === 'userinfo')).toEqual(
      Array<unknown>(3).fill({ ...granted, subject: user.id, clientId: web.client.clientId, resourceId: user.id, decision: 'allow', reason: 'granted' }),
    );
  });

  it('refuses a token without openid (403 insufficient_scope), an ID token and no token (401)', async () => {
    const recorded = app.oauth.decisions.length;
    const noOpenid = await tokensFor('read:posts');
    const scoped = await userinfo(noOpenid.access_token);
    expect({ status: scoped.statusCode, challenge: scoped.headers['www-authenticate'], error: scoped.json().error }).toEqual({
      status: 403,
      challenge: 'Bearer realm="portcullis", error="insufficient_scope", scope="openid"',
      error: 'insufficient_scope',
    });
    const withId = await tokensFor('openid read:posts');
    const idAsAccess = await userinfo(withId.id_token!);
    expect({ status: idAsAccess.statusCode, challenge: idAsAccess.headers['www-authenticate'] }).toEqual({ status: 401, challenge: 'Bearer realm="portcullis", error="invalid_token"' });
    const none = await app.oauth.app.inject({ method: 'GET', url: '/oauth/userinfo' });
    expect({ status: none.statusCode, challenge: none.headers['www-authenticate'] }).toEqual({ status: 401, challenge: 'Bearer realm="portcullis"' });
    // A header with nothing in it is no token either (not a caller without openid).
    const empty = await app.oauth.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: '' } });
    expect({ status: empty.statusCode, challenge: empty.headers['www-authenticate'] }).toEqual({ status: 401, challenge: 'Bearer realm="portcullis", error="invalid_token"' });
    // Recorded: the user's token refused for its scope as the user's decision; the refused tokens as the
    // address's (the audit log aggregates those per window).
    const refused = { requestId: expect.any(String), interface: 'oauth', operation: 'userinfo', resourceType: 'user', sourceAddress: '127.0.0.1', decision: 'deny' };
    expect(app.oauth.decisions.slice(recorded).filter((d) => d.operation === 'userinfo')).toEqual([
      { ...refused, subject: user.id, clientId: web.client.clientId, resourceId: user.id, reason: 'scope' },
      { ...refused, subject: null, clientId: null, resourceId: null, reason: 'authentication' },
      { ...refused, subject: null, clientId: null, resourceId: null, reason: 'authentication' },
      { ...refused, subject: null, clientId: null, resourceId: null, reason: 'authentication' },
    ]);
  });

  it('introspects the client\'s own access and refresh tokens, and nothing of anyone else\'s', async () => {
    const tokens = await tokensFor('openid offline_access read:posts');
    const access = await introspect(tokens.access_token);
    expect({ status: access.statusCode, cache: access.headers['cache-control'], body: access.json() }).toEqual({
      status: 200,
      cache: 'no-store',
      body: {
        active: true,
        scope: 'openid offline_access read:posts',
        client_id: web.client.clientId,
        sub: user.id,
        token_type: 'Bearer',
        exp: expect.any(Number),
        iat: expect.any(Number),
        iss: app.config.issuer,
        aud: app.config.issuer,
        jti: expect.stringMatching(/^[0-9a-f]{32}$/),
      },
    });
    expect((await introspect(tokens.refresh_token!, web, 'refresh_token')).json()).toEqual({
      active: true,
      scope: 'openid offline_access read:posts',
      client_id: web.client.clientId,
      sub: user.id,
      exp: expect.any(Number),
      iat: expect.any(Number),
      iss: app.config.issuer,
    });
    const stranger = await createWebClient(app.db, { name: 'Someone else' });
    expect((await introspect(tokens.access_token, stranger)).json()).toEqual({ active: false });
    expect((await introspect(tokens.refresh_token!, stranger)).json()).toEqual({ active: false });
    expect((await introspect('not-a-token')).json()).toEqual({ active: false });
  });

  it('describes a refresh token as active only while the grant would take it: maximum lifetime, the client\'s grant', async () => {
    const tokens = await tokensFor('offline_access read:posts');
    const refreshToken = tokens.refresh_token!;
    const rows = app.db.kysely.updateTable('refreshTokens').where('tokenHash', '=', tokenLookupKey(refreshToken));
    // Signed in 90 days less an hour ago: active, and its exp is the family's end, before the token's own.
    const signedInAt = Math.floor(Date.now() / 1000) - 90 * 86400 + 3600;
    await rows.set({ authTime: new Date(signedInAt * 1000).toISOString() }).execute();
    expect((await introspect(refreshToken, web, 'refresh_token')).json()).toMatchObject({ active: true, exp: signedInAt + 90 * 86400 });
    // Past REFRESH_TOKEN_MAX_LIFETIME (lowered since it was issued, say): the token endpoint refuses it, and
    // introspection agrees.
    await rows.set({ authTime: new Date(Date.now() - 90 * 86400_000 - 1000).toISOString() }).execute();
    expect((await introspect(refreshToken, web, 'refresh_token')).json()).toEqual({ active: false });
    expectTokenError(await refresh(app, web, refreshToken), 400, 'invalid_grant', 'The refresh token has expired.');

    // A client that no longer holds the refresh_token grant cannot use its refresh tokens: inactive too.
    const fresh = await tokensFor('offline_access read:posts');
    expect((await introspect(fresh.refresh_token!, web, 'refresh_token')).json()).toMatchObject({ active: true });
    // Changed as the CLI or the API would change it: the row, then the invalidation every process reads.
    const setGrants = async (grantTypes: readonly string[]) => {
      await app.db.kysely.updateTable('clients').set({ grantTypes: JSON.stringify(grantTypes), updatedAt: nowIso() }).where('id', '=', web.client.id).execute();
      app.oauth.clients.forget(web.client.clientId);
    };
    await setGrants(['authorization_code']);
    try {
      expect((await introspect(fresh.refresh_token!, web, 'refresh_token')).json()).toEqual({ active: false });
      expect((await introspect(fresh.access_token, web)).json()).toMatchObject({ active: true });
    } finally {
      await setGrants(web.client.grantTypes);
    }
  });

  it('refuses introspection to a public client, and records the refusal as a client that failed to authenticate', async () => {
    const native = await createWebClient(app.db, { type: 'public', secretHash: null, redirectUris: ['http://127.0.0.1/cb'] });
    const recorded = app.oauth.decisions.length;
    const reply = await app.oauth.app.inject({ method: 'POST', url: '/oauth/introspect', headers: FORM, payload: form({ token: 'x', client_id: native.client.clientId }) });
    expectTokenError(reply, 401, 'invalid_client', 'Introspection is for confidential clients.');
    expect(app.oauth.decisions.slice(recorded)).toEqual([
      {
        requestId: expect.any(String),
        interface: 'oauth',
        operation: 'introspect',
        sourceAddress: '127.0.0.1',
        subject: null,
        clientId: native.client.clientId,
        resourceType: null,
        resourceId: null,
        decision: 'deny',
        reason: 'authentication',
      },
    ]);
  });

  it('revokes a refresh token with its whole grant: the family and the access tokens issued from it', async () => {
    const tokens = await tokensFor('offline_access read:posts');
    const rotated = expectTokens(await refresh(app, web, tokens.refresh_token!), { scope: 'offline_access read:posts', refreshToken: true, idToken: false });
    const revoke = await app.oauth.app.inject({
      method: 'POST',
      url: '/oauth/revoke',
      headers: { ...FORM, authorization: basic(web.client.clientId, web.secret) },
      payload: form({ token: rotated.refresh_token!, token_type_hint: 'refresh_token' }),
    });
    expect({ status: revoke.statusCode, body: revoke.body }).toEqual({ status: 200, body: '' });
    expect((await introspect(tokens.access_token)).json()).toEqual({ active: false });
    expect((await introspect(rotated.access_token)).json()).toEqual({ active: false });
    expectTokenError(await refresh(app, web, rotated.refresh_token!), 400, 'invalid_grant', 'The refresh token was revoked.');
  });
});
