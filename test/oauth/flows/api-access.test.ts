import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId, nowIso } from '../../../src/storage/ids.js';
import { insertUser, type UserRecord } from '../../../src/storage/users.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { INACTIVE_SUBJECT_CHALLENGE, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE, expectError } from '../../access/support.js';
import { basic, form, FORM } from '../oauth-app.js';
import type { TestClient } from '../fixtures.js';
import { Browser, expectPage } from './browser.js';
import { answerConsent, authorizeUrl, codeOf, createWebClient, expectTokenError, expectTokens, NO_STORE, PASSWORD, pkce, sharedPasswordHash, signIn, type TokenResponse } from './flow.js';

const ISSUER = 'http://127.0.0.1:3000';
const SCOPE = 'openid offline_access read:posts write:posts';

/** The whole server (REST API, audit log, invalidation feed, rate limits) with a user signing in through its pages. */
describe.each(DATABASE_KINDS)('signing in to the API on %s', (kind) => {
  let t: TestApp;
  let user: UserRecord;
  let web: TestClient;
  let browser: Browser;

  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' });
    const id = newId();
    user = await insertUser(t.database.db.kysely, { id, email: `member-${id}@example.com`, name: 'Member', role: 'member', active: true, passwordHash: await sharedPasswordHash() }, nowIso());
    web = await createWebClient(t.database.db, { scopes: ['openid', 'offline_access', 'read:posts', 'write:posts'] });
    browser = new Browser(t.app.fastify);
  });
  afterAll(async () => {
    await t.close();
  });

  function tokenRequest(params: Record<string, string>) {
    return t.app.fastify.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, authorization: basic(web.client.clientId, web.secret) }, payload: form(params) });
  }

  /** Authorize (signing in and consenting when asked) and exchange the code. */
  async function signInAndExchange(): Promise<{ tokens: TokenResponse; code: string; verifier: string }> {
    const challenge = pkce();
    let reply = await browser.visit(authorizeUrl(web, { scope: SCOPE, pkce: challenge }));
    if (reply.statusCode === 200 && reply.body.includes('action="/oauth/login"')) reply = await signIn(browser, reply, user.email);
    if (reply.statusCode === 200) reply = await answerConsent(browser, reply);
    const code = codeOf(reply, ISSUER);
    const exchanged = await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: web.client.redirectUris[0]!, code_verifier: challenge.verifier });
    return { tokens: expectTokens(exchanged, { scope: SCOPE, refreshToken: true, idToken: true }), code, verifier: challenge.verifier };
  }

  it('signs in through the pages and calls the API with the access token', async () => {
    const loginPage = await browser.visit(authorizeUrl(web, { scope: SCOPE }));
    expectPage(loginPage, 'login');
    expect(browser.setCookies).toEqual([expect.stringMatching(/^portcullis-browser=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax$/)]);
    const { tokens } = await signInAndExchange();

    const who = await t.request({ url: '/v1/authorization', token: tokens.access_token });
    expect(who.statusCode, who.body).toBe(200);
    expect(who.json()).toMatchObject({ principal: { type: 'user', id: user.id, clientId: web.client.clientId, role: 'member' }, scopes: ['offline_access', 'openid', 'read:posts', 'write:posts'] });
    const created = await t.request({ method: 'POST', url: '/v1/posts', token: tokens.access_token, body: { title: 'Signed in', body: 'text', status: 'published' } });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ authorId: user.id, title: 'Signed in' });
    expect((await t.request({ url: '/v1/posts', token: tokens.access_token })).statusCode).toBe(200);
  });

  it('still refuses a token naming a client without a role as its own subject', async () => {
    const { accessToken } = await t.app.tokens.issueAccessToken({ client: web.client, subject: web.client.clientId, subjectType: 'client', scopes: ['read:posts'], grantType: 'client_credentials' });
    expectError(await t.request({ url: '/v1/posts', token: accessToken }), 401, INVALID_TOKEN, INACTIVE_SUBJECT_CHALLENGE);
  });

  it('answers the token request with no-store', async () => {
    const { tokens } = await signInAndExchange();
    const refreshed = await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! });
    expect(refreshed.headers).toMatchObject(NO_STORE);
  });

  it('refuses an ID token presented as a bearer token with 401 invalid_token', async () => {
    const { tokens } = await signInAndExchange();
    expectError(await t.request({ url: '/v1/posts', token: tokens.id_token! }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
  });

  it('ends the first exchange’s access token at once when the code is replayed', async () => {
    const { tokens, code, verifier } = await signInAndExchange();
    expect((await t.request({ url: '/v1/posts', token: tokens.access_token })).statusCode).toBe(200); // now cached
    const replay = await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: web.client.redirectUris[0]!, code_verifier: verifier });
    expectTokenError(replay, 400, 'invalid_grant', 'The code was already used; the tokens issued for it are revoked.');
    expectError(await t.request({ url: '/v1/posts', token: tokens.access_token }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
  });

  it('ends refresh when an administrator deactivates the user', async () => {
    const { tokens } = await signInAndExchange();
    const admin = await t.adminClientToken();
    const put = await t.request({ method: 'PUT', url: `/v1/users/${user.id}`, token: admin, body: { email: user.email, name: user.name, role: user.role, active: false } });
    expect(put.statusCode, put.body).toBe(200);
    expectTokenError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }), 400, 'invalid_grant', 'The refresh token was revoked.');
    expectError(await t.request({ url: '/v1/posts', token: tokens.access_token }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
    // The sign-in session ended with it.
    const reply = await browser.get(authorizeUrl(web, { scope: SCOPE, extra: { prompt: 'none' } }));
    expect(new URL(String(reply.headers.location)).searchParams.get('error')).toBe('login_required');
    // Reactivated, the user signs in again; the old refresh token stays dead.
    const back = await t.request({ method: 'PUT', url: `/v1/users/${user.id}`, token: admin, body: { email: user.email, name: user.name, role: user.role, active: true } });
    expect(back.statusCode, back.body).toBe(200);
    expectTokenError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }), 400, 'invalid_grant', 'The refresh token was revoked.');
    const login = await browser.visit(authorizeUrl(web, { scope: SCOPE }));
    expectPage(login, 'login');
    expect(await signIn(browser, login, user.email, PASSWORD).then((reply) => reply.statusCode)).toBe(303);
  });

  it('ends refresh when an administrator deletes the client', async () => {
    const { tokens } = await signInAndExchange();
    const admin = await t.adminClientToken();
    const deleted = await t.request({ method: 'DELETE', url: `/v1/clients/${web.client.id}`, token: admin });
    expect(deleted.statusCode, deleted.body).toBe(204);
    expectTokenError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }), 401, 'invalid_client', 'Client authentication failed.');
    expectError(await t.request({ url: '/v1/posts', token: tokens.access_token }), 401, INVALID_TOKEN, INVALID_TOKEN_CHALLENGE);
  });
});
