import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { createClient, type TestClient } from '../fixtures.js';
import { form, FORM } from '../oauth-app.js';
import { Browser, hiddenInputs, pageHeading } from './browser.js';
import { countRows, createUser, expectTokenError, expectTokens, openFlowApp, PASSWORD, refresh, tokenRequest, type FlowApp } from './flow.js';

const WRONG = 'The username or password is wrong.';

function createLegacyClient(t: FlowApp, overrides: Parameters<typeof createClient>[1] = {}): Promise<TestClient> {
  return createClient(t.db, { name: 'Legacy app', legacy: true, grantTypes: ['password', 'refresh_token'], scopes: ['read:posts', 'write:posts'], role: null, ...overrides });
}

function passwordGrant(t: FlowApp, client: TestClient, params: Record<string, string>) {
  return tokenRequest(t, client, { grant_type: 'password', ...params });
}

describe.each(DATABASE_KINDS)('the password grant on %s', (kind) => {
  describe('by default', () => {
    let t: FlowApp;
    let legacy: TestClient;
    let user: UserRecord;

    beforeAll(async () => {
      t = await openFlowApp(kind);
      legacy = await createLegacyClient(t);
      user = await createUser(t.db);
    });
    afterAll(async () => {
      await t.close();
    });

    it('is not offered, not even to a legacy client, which is told that the server has it disabled', async () => {
      const recorded = t.oauth.decisions.length;
      const reply = await passwordGrant(t, legacy, { username: user.email, password: PASSWORD });
      expectTokenError(reply, 400, 'unsupported_grant_type', 'This server has the password grant disabled (operators enable it with OAUTH_PASSWORD_GRANT=enabled).');
      expect(await countRows(t.db, 'accessTokens')).toBe(0);
      expect(t.oauth.decisions.slice(recorded)).toEqual([
        expect.objectContaining({ operation: 'token', subject: null, clientId: legacy.client.clientId, decision: 'deny', reason: 'grant' }),
      ]);
    });

    it('answers everyone else with the generic text: other clients, a legacy client not registered for it, failed authentication', async () => {
      const generic = 'The grant_type is not supported by this server.';
      const service = await createClient(t.db);
      const legacyWithoutGrant = await createLegacyClient(t, { grantTypes: ['client_credentials'], role: 'member' });
      for (const client of [service, legacyWithoutGrant]) {
        expectTokenError(await passwordGrant(t, client, { username: user.email, password: PASSWORD }), 400, 'unsupported_grant_type', generic);
      }
      const recorded = t.oauth.decisions.length;
      const wrongSecret = await passwordGrant(t, { ...legacy, secret: 'not-the-secret' }, { username: user.email, password: PASSWORD });
      expectTokenError(wrongSecret, 400, 'unsupported_grant_type', generic);
      expect(t.oauth.decisions.slice(recorded)).toEqual([
        expect.objectContaining({ operation: 'token', subject: null, clientId: legacy.client.clientId, decision: 'deny', reason: 'authentication' }),
      ]);
      const anonymous = await t.oauth.app.inject({ method: 'POST', url: '/oauth/token', headers: FORM, payload: form({ grant_type: 'password', username: user.email, password: PASSWORD }) });
      expectTokenError(anonymous, 400, 'unsupported_grant_type', generic);
      expect(await countRows(t.db, 'accessTokens')).toBe(0);
    });

    it('is not listed in the metadata', async () => {
      const metadata = await t.oauth.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' });
      expect(metadata.json().grant_types_supported).not.toContain('password');
    });
  });

  describe('with OAUTH_PASSWORD_GRANT=enabled', () => {
    let t: FlowApp;
    let legacy: TestClient;
    let user: UserRecord;

    beforeAll(async () => {
      t = await openFlowApp(kind, { OAUTH_PASSWORD_GRANT: 'enabled' });
      legacy = await createLegacyClient(t);
      user = await createUser(t.db);
    });
    afterAll(async () => {
      await t.close();
    });

    it('lists the legacy application on the user\'s account page, where withdrawing it ends its tokens and refresh family', async () => {
      const holder = await createUser(t.db);
      const tokens = expectTokens(await passwordGrant(t, legacy, { username: holder.email, password: PASSWORD, scope: 'read:posts' }), { scope: 'read:posts', refreshToken: true, idToken: false });
      const browser = new Browser(t.oauth.app);
      const login = await browser.visit('/oauth/login');
      const page = await browser.submit('/oauth/login', { ...hiddenInputs(login.body), email: holder.email, password: PASSWORD });
      expect({ status: page.statusCode, heading: pageHeading(page.body) }).toEqual({ status: 200, heading: 'Your account' });
      expect(page.body).toMatch(/<td>Legacy app<\/td><td>read:posts<\/td><td>\d{4}-\d{2}-\d{2}<\/td>/);
      const start = page.body.indexOf('action="/oauth/account/applications/revoke"');
      const fields = hiddenInputs(page.body.slice(start, page.body.indexOf('</form>', start)));
      expect(fields.application).toBe(legacy.client.id);
      const done = await browser.post('/oauth/account/applications/revoke', fields);
      expect({ status: done.statusCode, notice: /<p class="notice" role="status">([^<]*)</.exec(done.body)?.[1] }).toEqual({ status: 200, notice: 'The application no longer has access.' });
      expect(done.body).toContain('<p>None.</p>');
      await expect(t.oauth.tokens.verifyAccessToken(tokens.access_token)).rejects.toMatchObject({ name: 'InvalidTokenError' });
      expectTokenError(await refresh(t, legacy, tokens.refresh_token!), 400, 'invalid_grant', 'The refresh token was revoked.');
    });

    it('is listed in the metadata', async () => {
      const metadata = await t.oauth.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' });
      expect(metadata.json().grant_types_supported).toContain('password');
    });

    it('issues tokens to a legacy client for the user’s password', async () => {
      const reply = await passwordGrant(t, legacy, { username: user.email, password: PASSWORD });
      const body = expectTokens(reply, { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
      const verified = await t.oauth.tokens.verifyAccessToken(body.access_token);
      expect(verified).toMatchObject({ clientId: legacy.client.clientId, subject: user.id, subjectType: 'user', scopes: ['read:posts', 'write:posts'], grantType: 'password' });
      expect(t.oauth.decisions).toContainEqual({
        requestId: expect.any(String),
        interface: 'oauth',
        operation: 'token',
        sourceAddress: '127.0.0.1',
        subject: user.id,
        clientId: legacy.client.clientId,
        resourceType: 'token',
        resourceId: verified.jti,
        decision: 'allow',
        reason: 'granted',
        scopes: 'read:posts write:posts',
      });
      expectTokens(await refresh(t, legacy, body.refresh_token!), { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
    });

    it('issues the scope asked for, and refuses one the client may not have', async () => {
      expectTokens(await passwordGrant(t, legacy, { username: user.email, password: PASSWORD, scope: 'read:posts' }), { scope: 'read:posts', refreshToken: true, idToken: false });
      const reply = await passwordGrant(t, legacy, { username: user.email, password: PASSWORD, scope: 'read:users' });
      expectTokenError(reply, 400, 'invalid_scope', 'The client may not request: read:users.');
    });

    it('refuses a client that is not marked legacy, though registered for the grant', async () => {
      const modern = await createLegacyClient(t, { legacy: false });
      const before = await countRows(t.db, 'accessTokens');
      const reply = await passwordGrant(t, modern, { username: user.email, password: PASSWORD });
      expectTokenError(reply, 400, 'unauthorized_client', 'The password grant is not available to this client.');
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
    });

    it('refuses a legacy client not registered for the grant', async () => {
      const other = await createLegacyClient(t, { grantTypes: ['authorization_code'] });
      const reply = await passwordGrant(t, other, { username: user.email, password: PASSWORD });
      expectTokenError(reply, 400, 'unauthorized_client', 'The password grant is not available to this client.');
    });

    it('refuses a wrong password and an unknown username alike, issuing nothing', async () => {
      const before = await countRows(t.db, 'accessTokens');
      expectTokenError(await passwordGrant(t, legacy, { username: user.email, password: 'not the password' }), 400, 'invalid_grant', WRONG);
      expectTokenError(await passwordGrant(t, legacy, { username: 'nobody@example.com', password: PASSWORD }), 400, 'invalid_grant', WRONG);
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
      expect(t.oauth.decisions.at(-1)).toEqual({
        requestId: expect.any(String),
        sourceAddress: '127.0.0.1',
        interface: 'oauth',
        operation: 'token',
        subject: null,
        clientId: legacy.client.clientId,
        resourceType: null,
        resourceId: null,
        decision: 'deny',
        reason: 'grant',
      });
    });

    it('refuses a deactivated user', async () => {
      const inactive = await createUser(t.db, { active: false });
      expectTokenError(await passwordGrant(t, legacy, { username: inactive.email, password: PASSWORD }), 400, 'invalid_grant', WRONG);
    });

    it('requires username and password', async () => {
      expectTokenError(await passwordGrant(t, legacy, { username: user.email }), 400, 'invalid_request', 'username and password are required.');
      expectTokenError(await passwordGrant(t, legacy, { password: PASSWORD }), 400, 'invalid_request', 'username and password are required.');
    });

    it('refuses the sixth attempt after five failures, even with the right password, with Retry-After', async () => {
      const target = await createUser(t.db);
      const guesses = await Promise.all([1, 2, 3, 4, 5].map((i) => passwordGrant(t, legacy, { username: target.email, password: `guess ${i}` })));
      for (const guess of guesses) expectTokenError(guess, 400, 'invalid_grant', WRONG);
      const before = await countRows(t.db, 'accessTokens');
      const refused = await passwordGrant(t, legacy, { username: target.email, password: PASSWORD });
      expect(refused.statusCode).toBe(400);
      const retryAfter = Number(refused.headers['retry-after']);
      // The window opened when the first guess was reserved, before its password check (seconds on a loaded machine).
      expect(retryAfter).toBeGreaterThan(840);
      expect(retryAfter).toBeLessThanOrEqual(900);
      expect(refused.json()).toEqual({ error: 'invalid_grant', error_description: `Too many failed sign-ins; retry in ${retryAfter} s.` });
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
      // Another account is not affected.
      expectTokens(await passwordGrant(t, legacy, { username: user.email, password: PASSWORD }), { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
    });
  });
});
