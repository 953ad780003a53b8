import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import type { TestClient } from '../fixtures.js';
import { Browser, expectPage, hiddenInputs } from './browser.js';
import {
  answerConsent,
  authorizeUrl,
  codeOf,
  createUser,
  createWebClient,
  exchangeCode,
  expectErrorRedirect,
  expectTokenError,
  expectTokens,
  openFlowApp,
  PASSWORD,
  pkce,
  refresh,
  type FlowApp,
} from './flow.js';

const WRONG_PASSWORD = 'Tr0ub4dor&3-not-it';

describe.each(DATABASE_KINDS)('audit records of sign-in on %s', (kind) => {
  let t: FlowApp;
  let user: UserRecord;
  let web: TestClient;
  let other: TestClient;
  /** Every string that must never reach the audit log. */
  const secrets: string[] = [];

  beforeAll(async () => {
    t = await openFlowApp(kind);
    user = await createUser(t.db);
    web = await createWebClient(t.db);
    other = await createWebClient(t.db);
    secrets.push(PASSWORD, WRONG_PASSWORD, web.secret, other.secret);
  });
  afterAll(async () => {
    await t.close();
  });

  it('records each decision of a sign-in, with its scopes, and nothing secret', async () => {
    const { decisions } = t.oauth;
    const issuer = t.config.issuer;
    const browser = new Browser(t.oauth.app);
    const challenge = pkce();
    secrets.push(challenge.verifier);

    // An invalid scope is refused before anyone signs in.
    expectErrorRedirect(await browser.get(authorizeUrl(web, { scope: 'read:users' })), issuer, 'invalid_scope', 'The application asked for access it is not registered for.');
    const loginPage = await browser.visit(authorizeUrl(web, { scope: 'openid offline_access read:posts write:posts', pkce: challenge }));
    const form = hiddenInputs(loginPage.body);
    secrets.push(form.interaction!, form.csrf_token!);
    expectPage(await browser.post('/oauth/login', { ...form, email: user.email, password: WRONG_PASSWORD }), 'login', 401);
    const consentPage = await browser.submit('/oauth/login', { ...form, email: user.email, password: PASSWORD });
    secrets.push(...browser.cookies.values(), hiddenInputs(consentPage.body).csrf_token!);
    const code = codeOf(await answerConsent(browser, consentPage, { scopes: ['openid', 'offline_access', 'read:posts'] }), issuer);
    secrets.push(code);

    const tokens = expectTokens(await exchangeCode(t, web, code, { code_verifier: challenge.verifier }), { scope: 'openid offline_access read:posts', refreshToken: true, idToken: true });
    const first = await t.oauth.tokens.verifyAccessToken(tokens.access_token);
    const refreshed = expectTokens(await refresh(t, web, tokens.refresh_token!), { scope: 'openid offline_access read:posts', refreshToken: true, idToken: true });
    const second = await t.oauth.tokens.verifyAccessToken(refreshed.access_token);
    secrets.push(tokens.access_token, tokens.refresh_token!, tokens.id_token!, refreshed.access_token, refreshed.refresh_token!, refreshed.id_token!);
    // The old refresh token again (reuse), then the code again (reuse), then a wrong verifier on a new code.
    expectTokenError(await refresh(t, web, tokens.refresh_token!), 400, 'invalid_grant', 'The refresh token was already used; its family is revoked.');
    expectTokenError(await exchangeCode(t, web, code, { code_verifier: challenge.verifier }), 400, 'invalid_grant', 'The code was already used; the tokens issued for it are revoked.');
    const again = codeOf(await browser.get(authorizeUrl(web, { scope: 'read:posts', pkce: challenge })), issuer);
    secrets.push(again);
    expectTokenError(await exchangeCode(t, web, again, { code_verifier: pkce().verifier }), 400, 'invalid_grant', 'The code_verifier does not match the code_challenge.');
    // Another client, denied.
    const denied = await answerConsent(browser, await browser.visit(authorizeUrl(other)), { decision: 'deny' });
    expectErrorRedirect(denied, issuer, 'access_denied', 'The user denied the request.');

    const oauth = { requestId: expect.any(String), interface: 'oauth' };
    const address = { sourceAddress: '127.0.0.1' };
    const clientId = web.client.clientId;
    const none = { resourceType: null, resourceId: null };
    expect(decisions).toEqual([
      { ...oauth, ...address, operation: 'authorize', subject: null, clientId, ...none, decision: 'deny', reason: 'scope' },
      { ...oauth, ...address, operation: 'login', subject: null, clientId: null, ...none, decision: 'deny', reason: 'authentication' },
      { ...oauth, ...address, operation: 'login', subject: user.id, clientId: null, ...none, decision: 'allow', reason: 'authenticated' },
      { ...oauth, operation: 'consent', subject: user.id, clientId, ...none, decision: 'allow', reason: 'granted', scopes: 'openid offline_access read:posts' },
      { ...oauth, operation: 'authorize', subject: user.id, clientId, resourceType: 'grant', resourceId: first.grantId, decision: 'allow', reason: 'granted', scopes: 'openid offline_access read:posts' },
      { ...oauth, ...address, operation: 'token', subject: user.id, clientId, resourceType: 'token', resourceId: first.jti, decision: 'allow', reason: 'granted', scopes: 'openid offline_access read:posts' },
      { ...oauth, ...address, operation: 'token', subject: user.id, clientId, resourceType: 'token', resourceId: second.jti, decision: 'allow', reason: 'granted', scopes: 'openid offline_access read:posts' },
      { ...oauth, ...address, operation: 'token', subject: user.id, clientId, resourceType: 'grant', resourceId: first.grantId, decision: 'deny', reason: 'reuse' },
      { ...oauth, ...address, operation: 'token', subject: user.id, clientId, resourceType: 'grant', resourceId: first.grantId, decision: 'deny', reason: 'reuse' },
      { ...oauth, operation: 'authorize', subject: user.id, clientId, resourceType: 'grant', resourceId: expect.any(String), decision: 'allow', reason: 'granted', scopes: 'read:posts' },
      { ...oauth, ...address, operation: 'token', subject: null, clientId, ...none, decision: 'deny', reason: 'grant' },
      { ...oauth, operation: 'consent', subject: user.id, clientId: other.client.clientId, ...none, decision: 'deny', reason: 'consent', scopes: 'read:posts write:posts' },
    ]);
    expect(second.grantId).toBe(first.grantId);

    const recorded = JSON.stringify(decisions);
    expect(secrets.length).toBeGreaterThan(15);
    for (const secret of secrets) {
      expect(secret.length).toBeGreaterThan(10);
      expect(recorded).not.toContain(secret);
    }
  });
});
