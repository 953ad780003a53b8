import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { Config } from '../../../src/config/config.js';
import { hashPassword } from '../../../src/oauth/passwords.js';
import type { NewClient } from '../../../src/storage/clients.js';
import type { Db } from '../../../src/storage/dialect.js';
import { newId, nowIso } from '../../../src/storage/ids.js';
import { insertUser, type UserRecord } from '../../../src/storage/users.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/databases.js';
import { createClient, makeConfig, type TestClient } from '../fixtures.js';
import { basic, buildOAuthApp, form, FORM, SCOPES, type OAuthApp, type OAuthSeams } from '../oauth-app.js';
import { Browser, expectPage, hiddenInputs, offeredScopes, type Reply } from './browser.js';

export const PASSWORD = 'correct horse battery staple';
export const REDIRECT_URI = 'https://app.example/cb';
export const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };

let passwordHash: Promise<string> | undefined;

/** scrypt costs about 0.3 s: one hash per test file, shared by its users (they all have PASSWORD). */
export function sharedPasswordHash(): Promise<string> {
  passwordHash ??= hashPassword(PASSWORD);
  return passwordHash;
}

export interface FlowApp {
  database: TestDatabase;
  db: Db;
  config: Config;
  oauth: OAuthApp;
  close(): Promise<void>;
}

/** A fresh database and a real Fastify instance with the OAuth routes; `env` overrides the configuration. */
export async function openFlowApp(kind: 'sqlite' | 'postgres', env: Record<string, string> = {}, seams: OAuthSeams = {}): Promise<FlowApp> {
  const database = await createTestDatabase(kind);
  const config = makeConfig(env);
  const oauth = await buildOAuthApp(database.db, config, SCOPES, seams);
  return {
    database,
    db: database.db,
    config,
    oauth,
    async close() {
      await oauth.app.close();
      await database.drop();
    },
  };
}

export async function createUser(db: Db, overrides: Partial<UserRecord> = {}): Promise<UserRecord> {
  const id = newId();
  return insertUser(
    db.kysely,
    { id, email: `user-${id}@example.com`, name: 'Test user', role: 'member', active: true, passwordHash: await sharedPasswordHash(), ...overrides },
    nowIso(),
  );
}

/** A confidential web application using the authorization code grant with refresh tokens. */
export function createWebClient(db: Db, overrides: Partial<NewClient> = {}): Promise<TestClient> {
  return createClient(db, {
    name: 'Example Web App',
    redirectUris: [REDIRECT_URI],
    grantTypes: ['authorization_code', 'refresh_token'],
    scopes: ['openid', 'offline_access', 'read:posts', 'write:posts'],
    role: null,
    ...overrides,
  });
}

/** A public native application (RFC 8252) on a loopback redirect URI. */
export function createNativeClient(db: Db, overrides: Partial<NewClient> = {}): Promise<TestClient> {
  return createWebClient(db, { name: 'Example Native App', type: 'public', secretHash: null, redirectUris: ['http://127.0.0.1:8080/cb'], ...overrides });
}

export interface Pkce {
  verifier: string;
  challenge: string;
}

/** RFC 7636 §4.1-4.2 with S256. */
export function pkce(): Pkce {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export interface AuthorizeOptions {
  scope?: string;
  state?: string;
  pkce?: Pkce | null;
  redirectUri?: string;
  /** More parameters, or `undefined` to leave one of the defaults out. */
  extra?: Record<string, string | undefined>;
}

/** The authorization request's URL: response_type=code, the client's first redirect URI, state and PKCE unless told otherwise. */
export function authorizeUrl(client: TestClient, options: AuthorizeOptions = {}): string {
  const params: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: client.client.clientId,
    redirect_uri: options.redirectUri ?? client.client.redirectUris[0],
    scope: options.scope ?? 'read:posts write:posts',
    state: options.state ?? 'state-123',
    ...(options.pkce === null ? {} : { code_challenge: (options.pkce ?? pkce()).challenge, code_challenge_method: 'S256' }),
    ...options.extra,
  };
  const defined = Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined);
  return `/oauth/authorize?${new URLSearchParams(defined).toString()}`;
}

/** The query of a 303 to the client: asserts the redirect (target, page headers, no body) and returns its parameters. */
export function clientRedirect(reply: Reply, redirectUri = REDIRECT_URI): Record<string, string> {
  expect(reply.statusCode, reply.body).toBe(303);
  expect(reply.body).toBe('');
  expect(reply.headers).toMatchObject({ 'x-frame-options': 'DENY', 'referrer-policy': 'no-referrer', 'cache-control': 'no-store' });
  const location = new URL(String(reply.headers.location));
  expect(`${location.origin}${location.pathname}`).toBe(redirectUri);
  const params: Record<string, string> = {};
  for (const [name, value] of location.searchParams) {
    expect(params[name], `${name} appears once`).toBeUndefined();
    params[name] = value;
  }
  return params;
}

/** An error redirect (RFC 6749 §4.1.2.1 with RFC 9207's `iss`): the whole query; `state: null` when none may come back. */
export function expectErrorRedirect(reply: Reply, issuer: string, error: string, description: string, state: string | null = 'state-123', redirectUri = REDIRECT_URI): void {
  const expected: Record<string, string> = { error, error_description: description, iss: issuer };
  if (state !== null) expected.state = state;
  expect(clientRedirect(reply, redirectUri)).toEqual(expected);
}

/** The code of a successful redirect, checking that it carries exactly code, state and iss. */
export function codeOf(reply: Reply, issuer: string, state = 'state-123', redirectUri = REDIRECT_URI): string {
  const params = clientRedirect(reply, redirectUri);
  expect(params).toEqual({ code: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), state, iss: issuer });
  return params.code!;
}

/** Posts the login page's form with the credentials. */
export function signIn(browser: Browser, loginPage: Reply, email: string, password = PASSWORD): Promise<Reply> {
  expectPage(loginPage, 'login');
  const { interaction, csrf_token } = hiddenInputs(loginPage.body);
  return browser.submit('/oauth/login', { interaction: interaction!, csrf_token: csrf_token!, email, password });
}

/** Answers the consent page: allow (the ticked scopes, every offered one by default) or deny. */
export function answerConsent(browser: Browser, consentPage: Reply, answer: { decision?: 'allow' | 'deny'; scopes?: string[] } = {}): Promise<Reply> {
  expectPage(consentPage, 'consent');
  const { interaction, csrf_token } = hiddenInputs(consentPage.body);
  const scopes = answer.scopes ?? offeredScopes(consentPage.body);
  const fields: [string, string][] = [['interaction', interaction!], ['csrf_token', csrf_token!], ...scopes.map((scope): [string, string] => ['scope', scope])];
  fields.push(['decision', answer.decision ?? 'allow']);
  return browser.submit('/oauth/consent', fields);
}

export interface ObtainedCode {
  code: string;
  verifier: string;
  /** The answer that carried the code. */
  reply: Reply;
}

/**
 * The whole front channel: authorize, sign in when asked, consent to everything when asked, and return
 * the code. `user` signs in if the browser has no session (or the request forces it).
 */
export async function obtainCode(app: FlowApp, browser: Browser, client: TestClient, user: UserRecord, options: AuthorizeOptions = {}): Promise<ObtainedCode> {
  const challenge = options.pkce === null ? null : (options.pkce ?? pkce());
  let reply = await browser.visit(authorizeUrl(client, { ...options, pkce: challenge }));
  if (reply.statusCode === 200 && reply.body.includes('action="/oauth/login"')) reply = await signIn(browser, reply, user.email);
  if (reply.statusCode === 200 && reply.body.includes('action="/oauth/consent"')) reply = await answerConsent(browser, reply);
  const code = codeOf(reply, app.config.issuer, options.state, options.redirectUri ?? client.client.redirectUris[0]);
  return { code, verifier: challenge?.verifier ?? '', reply };
}

/** Client authentication as the client would send it: Basic for a confidential client, client_id for a public one. */
export function clientAuth(client: TestClient): { headers: Record<string, string>; params: Record<string, string> } {
  if (client.client.type === 'public') return { headers: {}, params: { client_id: client.client.clientId } };
  return { headers: { authorization: basic(client.client.clientId, client.secret) }, params: {} };
}

export function tokenRequest(app: FlowApp, client: TestClient, params: Record<string, string>): Promise<Reply> {
  const auth = clientAuth(client);
  return app.oauth.app.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, ...auth.headers }, payload: form({ ...auth.params, ...params }) });
}

/** POST /oauth/token with grant_type=authorization_code. */
export function exchangeCode(app: FlowApp, client: TestClient, code: string, extra: Record<string, string | undefined> = {}): Promise<Reply> {
  const params: Record<string, string | undefined> = { grant_type: 'authorization_code', code, redirect_uri: client.client.redirectUris[0], ...extra };
  const defined = Object.fromEntries(Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined));
  return tokenRequest(app, client, defined);
}

export function refresh(app: FlowApp, client: TestClient, refreshToken: string, extra: Record<string, string> = {}): Promise<Reply> {
  return tokenRequest(app, client, { grant_type: 'refresh_token', refresh_token: refreshToken, ...extra });
}

/** A token error as RFC 6749 §5.2 spells it: status, no-store, the whole JSON body. */
export function expectTokenError(reply: Reply, status: number, error: string, description: string): void {
  expect({ status: reply.statusCode, body: reply.json() }).toEqual({ status, body: { error, error_description: description } });
  expect(reply.headers).toMatchObject(NO_STORE);
  expect(reply.headers['content-type']).toMatch(/^application\/json/);
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
  id_token?: string;
}

/** A successful token response (RFC 6749 §5.1): 200, no-store, and exactly the members expected. */
export function expectTokens(reply: Reply, expected: { scope: string; refreshToken: boolean; idToken: boolean; expiresIn?: number }): TokenResponse {
  expect(reply.statusCode, reply.body).toBe(200);
  expect(reply.headers).toMatchObject(NO_STORE);
  expect(reply.headers['content-type']).toMatch(/^application\/json/);
  const body = reply.json() as TokenResponse;
  expect(body).toEqual({
    access_token: expect.any(String),
    token_type: 'Bearer',
    expires_in: expected.expiresIn ?? 600,
    scope: expected.scope,
    ...(expected.refreshToken ? { refresh_token: expect.stringMatching(/^[0-9a-f]{12}[A-Za-z0-9_-]{43}$/) } : {}),
    ...(expected.idToken ? { id_token: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/) } : {}),
  });
  return body;
}

/** Rows in a table, for "nothing was issued". */
export async function countRows(db: Db, table: 'accessTokens' | 'refreshTokens' | 'authorizationCodes' | 'loginSessions' | 'consents' | 'invalidations'): Promise<number> {
  const row = await db.kysely.selectFrom(table).select((eb) => eb.fn.countAll<string | number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}
