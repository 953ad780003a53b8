import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestSecret } from '../../../src/oauth/secrets.js';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { createClient, type TestClient } from '../fixtures.js';
import { Browser, expectPage, hiddenInputs, offeredScopes } from './browser.js';
import {
  authorizeUrl,
  codeOf,
  countRows,
  createNativeClient,
  createUser,
  createWebClient,
  exchangeCode,
  expectTokenError,
  expectTokens,
  obtainCode,
  openFlowApp,
  PASSWORD,
  pkce,
  refresh,
  type FlowApp,
} from './flow.js';

const BURNT = 'This code was already presented in a failed exchange; start the authorization again.';

describe.each(DATABASE_KINDS)('authorization code with PKCE on %s', (kind) => {
  let t: FlowApp;
  let user: UserRecord;
  let thirdParty: TestClient;
  let firstParty: TestClient;
  let native: TestClient;
  /** Signed in once; the tests that are not about signing in reuse its session. */
  let signedIn: Browser;

  beforeAll(async () => {
    t = await openFlowApp(kind);
    user = await createUser(t.db);
    thirdParty = await createWebClient(t.db);
    firstParty = await createWebClient(t.db, { name: 'Portcullis Console', firstParty: true });
    native = await createNativeClient(t.db);
    signedIn = new Browser(t.oauth.app);
    await obtainCode(t, signedIn, firstParty, user);
  });
  afterAll(async () => {
    await t.close();
  });

  describe('the front channel, step by step', () => {
    it('sends a third-party client through login and consent, then back with code, state and iss', async () => {
      const browser = new Browser(t.oauth.app);
      const challenge = pkce();
      const start = await browser.get(authorizeUrl(thirdParty, { pkce: challenge }));
      expect(start.statusCode).toBe(303);
      expect(start.headers.location).toMatch(/^\/oauth\/login\?interaction=[A-Za-z0-9_-]{43}$/);
      expect([start.headers['set-cookie']].flat()).toEqual([expect.stringMatching(/^__Host-portcullis-browser=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Secure$/)]);
      expect(start.body).toBe('');

      const loginPage = await browser.get(String(start.headers.location));
      expectPage(loginPage, 'login');
      expect(loginPage.body).toContain('<p><strong>Example Web App</strong> asks you to sign in.</p>');
      const loginForm = hiddenInputs(loginPage.body);
      expect(loginForm).toEqual({ interaction: String(start.headers.location).split('=')[1], csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });

      const signedInReply = await browser.post('/oauth/login', { ...loginForm, email: user.email, password: PASSWORD });
      expect(signedInReply.statusCode).toBe(303);
      expect(signedInReply.headers.location).toBe(`/oauth/consent?interaction=${loginForm.interaction}`);
      expect([signedInReply.headers['set-cookie']].flat()).toEqual([
        expect.stringMatching(/^__Host-portcullis-session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Secure; Max-Age=43200$/),
        expect.stringMatching(/^__Host-portcullis-device=[A-Za-z0-9_-]{73}; Path=\/; HttpOnly; SameSite=Lax; Secure; Max-Age=7776000$/),
      ]);

      const consentPage = await browser.get(String(signedInReply.headers.location));
      expectPage(consentPage, 'consent');
      expect(consentPage.body).toContain('<h1>Allow Example Web App access?</h1>');
      expect(consentPage.body).toContain(`Signed in as <strong>${user.email}</strong>`);
      expect(consentPage.body).toContain('Description of read:posts');
      expect(offeredScopes(consentPage.body)).toEqual(['read:posts', 'write:posts']);
      const consentForm = hiddenInputs(consentPage.body);
      expect(consentForm).toEqual({ interaction: loginForm.interaction, csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
      expect(consentForm.csrf_token).not.toBe(loginForm.csrf_token);

      const back = await browser.post('/oauth/consent', [
        ['interaction', consentForm.interaction!],
        ['csrf_token', consentForm.csrf_token!],
        ['scope', 'read:posts'],
        ['scope', 'write:posts'],
        ['decision', 'allow'],
      ]);
      const code = codeOf(back, t.config.issuer);

      const tokens = await exchangeCode(t, thirdParty, code, { code_verifier: challenge.verifier });
      const body = expectTokens(tokens, { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
      await expect(t.oauth.tokens.verifyAccessToken(body.access_token)).resolves.toMatchObject({
        format: 'jwt',
        clientId: thirdParty.client.clientId,
        subject: user.id,
        subjectType: 'user',
        scopes: ['read:posts', 'write:posts'],
        grantType: 'authorization_code',
      });
    });

    it('skips the consent page for a first-party client', async () => {
      const browser = new Browser(t.oauth.app);
      const challenge = pkce();
      const loginPage = await browser.visit(authorizeUrl(firstParty, { pkce: challenge }));
      expectPage(loginPage, 'login');
      const back = await browser.post('/oauth/login', { ...hiddenInputs(loginPage.body), email: user.email, password: PASSWORD });
      const code = codeOf(back, t.config.issuer);
      expectTokens(await exchangeCode(t, firstParty, code, { code_verifier: challenge.verifier }), { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
    });

    it('serves a public native client on a loopback port of its choosing, authenticated by client_id alone', async () => {
      const redirectUri = 'http://127.0.0.1:49152/cb';
      const { code, verifier } = await obtainCode(t, signedIn, native, user, { redirectUri });
      const tokens = await exchangeCode(t, native, code, { code_verifier: verifier, redirect_uri: redirectUri });
      expectTokens(tokens, { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
    });

    it('accepts POST at the authorization endpoint (OpenID Connect Core §3.1.2.1)', async () => {
      const url = new URL(authorizeUrl(firstParty), 'http://x');
      const reply = await signedIn.post('/oauth/authorize', [...url.searchParams]);
      codeOf(reply, t.config.issuer);
    });
  });

  describe('the token endpoint', () => {
    it('lets a confidential client go without PKCE', async () => {
      const { code } = await obtainCode(t, signedIn, firstParty, user, { pkce: null });
      expectTokens(await exchangeCode(t, firstParty, code), { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
    });

    it('refuses a replayed code, revokes what the first exchange issued, and records the reuse', async () => {
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      const first = expectTokens(await exchangeCode(t, firstParty, code, { code_verifier: verifier }), { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
      // The client has used its token: this process has it verified and cached.
      const verified = await t.oauth.tokens.verifyAccessToken(first.access_token);
      const before = await countRows(t.db, 'accessTokens');

      const replay = await exchangeCode(t, firstParty, code, { code_verifier: verifier });
      expectTokenError(replay, 400, 'invalid_grant', 'The code was already used; the tokens issued for it are revoked.');
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
      await expect(t.oauth.tokens.verifyAccessToken(first.access_token)).rejects.toMatchObject({ name: 'InvalidTokenError' });
      expectTokenError(await refresh(t, firstParty, first.refresh_token!), 400, 'invalid_grant', 'The refresh token was revoked.');
      expect(t.oauth.decisions).toContainEqual(
        expect.objectContaining({ operation: 'token', subject: user.id, clientId: firstParty.client.clientId, resourceType: 'grant', resourceId: verified.grantId, decision: 'deny', reason: 'reuse' }),
      );
    });

    it('answers every later replay of a code the same way, ending nothing more and recording no more invalidations', async () => {
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      expectTokens(await exchangeCode(t, firstParty, code, { code_verifier: verifier }), { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
      expectTokenError(await exchangeCode(t, firstParty, code, { code_verifier: verifier }), 400, 'invalid_grant', 'The code was already used; the tokens issued for it are revoked.');
      const invalidations = await countRows(t.db, 'invalidations');
      const decisions = t.oauth.decisions.length;
      for (let replay = 0; replay < 3; replay++) {
        expectTokenError(await exchangeCode(t, firstParty, code, { code_verifier: verifier }), 400, 'invalid_grant', 'The code was already used; the tokens issued for it are revoked.');
      }
      // Each replay is still recorded as reuse; none writes an invalidation for every server to follow.
      expect(await countRows(t.db, 'invalidations')).toBe(invalidations);
      expect(t.oauth.decisions.slice(decisions).map((decision) => decision.reason)).toEqual(['reuse', 'reuse', 'reuse']);
    });

    it('lets one of two concurrent exchanges of a code win, and then revokes what it issued', async () => {
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      const replies = await Promise.all([exchangeCode(t, firstParty, code, { code_verifier: verifier }), exchangeCode(t, firstParty, code, { code_verifier: verifier })]);
      expect(replies.map((reply) => reply.statusCode).sort()).toEqual([200, 400]);
      const winner = replies.find((reply) => reply.statusCode === 200)!.json() as { access_token: string; refresh_token: string };
      expectTokenError(replies.find((reply) => reply.statusCode === 400)!, 400, 'invalid_grant', 'The code was already used; the tokens issued for it are revoked.');
      await expect(t.oauth.tokens.verifyAccessToken(winner.access_token)).rejects.toMatchObject({ name: 'InvalidTokenError' });
      expectTokenError(await refresh(t, firstParty, winner.refresh_token), 400, 'invalid_grant', 'The refresh token was revoked.');
    });

    it('burns the code on a wrong verifier: the right one fails afterwards, saying that no tokens were issued for it', async () => {
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      const before = await countRows(t.db, 'accessTokens');
      const wrong = await exchangeCode(t, firstParty, code, { code_verifier: pkce().verifier });
      expectTokenError(wrong, 400, 'invalid_grant', 'The code_verifier does not match the code_challenge.');
      const recorded = t.oauth.decisions.length;
      const right = await exchangeCode(t, firstParty, code, { code_verifier: verifier });
      expectTokenError(right, 400, 'invalid_grant', BURNT);
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
      // Nothing was issued, so there is no reuse to record: the retry is an ordinary refusal of the grant.
      expect(t.oauth.decisions.slice(recorded)).toEqual([
        expect.objectContaining({ operation: 'token', subject: null, clientId: firstParty.client.clientId, decision: 'deny', reason: 'grant' }),
      ]);
    });

    it('burns the code on a missing verifier or a wrong redirect_uri, and every later presentation says so', async () => {
      const missing = await obtainCode(t, signedIn, firstParty, user);
      expectTokenError(await exchangeCode(t, firstParty, missing.code), 400, 'invalid_grant', 'code_verifier is required.');
      expectTokenError(await exchangeCode(t, firstParty, missing.code, { code_verifier: missing.verifier }), 400, 'invalid_grant', BURNT);

      const misdirected = await obtainCode(t, signedIn, firstParty, user);
      const wrongUri = await exchangeCode(t, firstParty, misdirected.code, { code_verifier: misdirected.verifier, redirect_uri: 'https://app.example/other' });
      expectTokenError(wrongUri, 400, 'invalid_grant', 'redirect_uri does not match the authorization request.');
      expectTokenError(await exchangeCode(t, firstParty, misdirected.code, { code_verifier: misdirected.verifier }), 400, 'invalid_grant', BURNT);
      expectTokenError(await exchangeCode(t, firstParty, misdirected.code, { code_verifier: misdirected.verifier }), 400, 'invalid_grant', BURNT);
      const row = await t.db.kysely.selectFrom('authorizationCodes').select(['outcome', 'redeemedAt']).where('codeHash', '=', digestSecret(misdirected.code)).executeTakeFirstOrThrow();
      expect(row).toEqual({ outcome: 'refused', redeemedAt: expect.any(String) });
    });

    it('records a code that issued tokens as issued, so that only its replay revokes and counts as reuse', async () => {
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      expectTokens(await exchangeCode(t, firstParty, code, { code_verifier: verifier }), { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
      const row = await t.db.kysely.selectFrom('authorizationCodes').select('outcome').where('codeHash', '=', digestSecret(code)).executeTakeFirstOrThrow();
      expect(row).toEqual({ outcome: 'issued' });
      // A wrong verifier on the replay changes nothing: the code issued tokens, so they are revoked.
      expectTokenError(await exchangeCode(t, firstParty, code, { code_verifier: pkce().verifier }), 400, 'invalid_grant', 'The code was already used; the tokens issued for it are revoked.');
    });

    it('refuses a code with a challenge redeemed without a verifier', async () => {
      const { code } = await obtainCode(t, signedIn, firstParty, user);
      expectTokenError(await exchangeCode(t, firstParty, code), 400, 'invalid_grant', 'code_verifier is required.');
    });

    it('refuses a verifier for a code issued without a challenge (PKCE downgrade)', async () => {
      const { code } = await obtainCode(t, signedIn, firstParty, user, { pkce: null });
      const before = await countRows(t.db, 'accessTokens');
      const reply = await exchangeCode(t, firstParty, code, { code_verifier: pkce().verifier });
      expectTokenError(reply, 400, 'invalid_grant', 'The authorization request carried no code_challenge.');
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
    });

    it('refuses a redirect_uri other than the one the code was issued for', async () => {
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      const before = await countRows(t.db, 'accessTokens');
      const reply = await exchangeCode(t, firstParty, code, { code_verifier: verifier, redirect_uri: 'https://app.example/cb/' });
      expectTokenError(reply, 400, 'invalid_grant', 'redirect_uri does not match the authorization request.');
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
    });

    it('refuses the loopback code at another port than the one it was issued for', async () => {
      const { code, verifier } = await obtainCode(t, signedIn, native, user, { redirectUri: 'http://127.0.0.1:50000/cb' });
      const reply = await exchangeCode(t, native, code, { code_verifier: verifier, redirect_uri: 'http://127.0.0.1:8080/cb' });
      expectTokenError(reply, 400, 'invalid_grant', 'redirect_uri does not match the authorization request.');
    });

    it('refuses another client’s code without spending it', async () => {
      const other = await createWebClient(t.db, { firstParty: true });
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      const before = await countRows(t.db, 'accessTokens');
      const stolen = await exchangeCode(t, other, code, { code_verifier: verifier });
      expectTokenError(stolen, 400, 'invalid_grant', 'The code is not valid.');
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
      expectTokens(await exchangeCode(t, firstParty, code, { code_verifier: verifier }), { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
    });

    it('refuses an unknown code', async () => {
      expectTokenError(await exchangeCode(t, firstParty, 'x'.repeat(43), { code_verifier: pkce().verifier }), 400, 'invalid_grant', 'The code is not valid.');
    });

    it('refuses an expired code (a minute after issue)', async () => {
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      await t.db.kysely.updateTable('authorizationCodes').set({ expiresAt: new Date(Date.now() - 1000).toISOString() }).where('codeHash', '=', digestSecret(code)).execute();
      const before = await countRows(t.db, 'accessTokens');
      expectTokenError(await exchangeCode(t, firstParty, code, { code_verifier: verifier }), 400, 'invalid_grant', 'The code has expired.');
      expectTokenError(await exchangeCode(t, firstParty, code, { code_verifier: verifier }), 400, 'invalid_grant', BURNT);
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
    });

    it('issues codes that live one minute', async () => {
      const { code } = await obtainCode(t, signedIn, firstParty, user);
      const row = await t.db.kysely.selectFrom('authorizationCodes').selectAll().where('codeHash', '=', digestSecret(code)).executeTakeFirstOrThrow();
      expect(Date.parse(row.expiresAt) - Date.parse(row.issuedAt)).toBe(60_000);
    });

    it('refuses a request without code or without redirect_uri as invalid_request', async () => {
      const before = await countRows(t.db, 'accessTokens');
      expectTokenError(await exchangeCode(t, firstParty, '', { code: undefined }), 400, 'invalid_request', 'code is required.');
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      const noRedirect = await exchangeCode(t, firstParty, code, { code_verifier: verifier, redirect_uri: undefined });
      expectTokenError(noRedirect, 400, 'invalid_request', 'redirect_uri is required.');
      expect(await countRows(t.db, 'accessTokens')).toBe(before);
      // A malformed request does not spend the code.
      expectTokens(await exchangeCode(t, firstParty, code, { code_verifier: verifier }), { scope: 'read:posts write:posts', refreshToken: true, idToken: false });
    });

    it('refuses a client that is not registered for the grant', async () => {
      const service = await createClient(t.db);
      const { code, verifier } = await obtainCode(t, signedIn, firstParty, user);
      const reply = await exchangeCode(t, service, code, { code_verifier: verifier });
      expectTokenError(reply, 400, 'unauthorized_client', 'The client may not use the authorization code grant.');
    });

    it('refuses a public client that presents a secret it does not have', async () => {
      const { code, verifier } = await obtainCode(t, signedIn, native, user);
      const reply = await exchangeCode(t, { ...native, client: { ...native.client, type: 'confidential' } }, code, { code_verifier: verifier });
      expectTokenError(reply, 401, 'invalid_client', 'Client authentication failed.');
    });
  });
});
