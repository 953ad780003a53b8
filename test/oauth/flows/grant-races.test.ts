import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policy } from '../../../generated/policy.js';
import { routes } from '../../../generated/routes.js';
import { replacementContracts } from '../../../src/rest/validation.js';
import { InProcessEventBus } from '../../../src/events/event-bus.js';
import { handlers } from '../../../src/operations/index.js';
import { ResourceLoaders } from '../../../src/resources/loaders.js';
import { resources } from '../../../src/resources/registry.js';
import type { TokenPrincipal } from '../../../src/policy/principal.js';
import { digestSecret, generateSecret } from '../../../src/oauth/secrets.js';
import { revokeClientTokens } from '../../../src/oauth/tokens/access-token-records.js';
import { newId, nowIso } from '../../../src/storage/ids.js';
import { insertRefreshToken } from '../../../src/storage/refresh-tokens.js';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { createClient, type TestClient } from '../fixtures.js';
import { basic, form, FORM } from '../oauth-app.js';
import { Browser, hiddenInputs, type Reply } from './browser.js';
import {
  answerConsent,
  authorizeUrl,
  createUser,
  createWebClient,
  exchangeCode,
  expectErrorRedirect,
  expectTokenError,
  expectTokens,
  obtainCode,
  openFlowApp,
  PASSWORD,
  pkce,
  refresh,
  signIn,
  tokenRequest,
  type FlowApp,
  type TokenResponse,
} from './flow.js';

const SCOPE = 'openid offline_access read:posts';
const REFRESH_REVOKED = 'The refresh token was revoked.';
const CODE_ENDED = "This code was withdrawn before it was exchanged (the user's grants were ended); start the authorization again.";
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const DEVICE_SCOPE = 'read:posts offline_access';

/**
 * One of the server's test seams, held at its next passage until the test releases it: the test makes its
 * revocation happen exactly there.
 */
class Pause {
  #next: { reached: () => void; released: Promise<void> } | null = null;

  arm(): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    this.#next = { reached, released };
    return { reached: reachedPromise, release };
  }

  readonly seam = async (): Promise<void> => {
    const next = this.#next;
    if (next === null) return;
    this.#next = null;
    next.reached();
    await next.released;
  };
}

/** The hidden inputs of the page's form posting to `action` (the account page has several). */
function formFields(body: string, action: string): Record<string, string> {
  const start = body.indexOf(`action="${action}"`);
  expect(start, action).toBeGreaterThan(0);
  return hiddenInputs(body.slice(start, body.indexOf('</form>', start)));
}

describe.each(DATABASE_KINDS)('grants racing revocations on %s', (kind) => {
  let app: FlowApp;
  let web: TestClient;
  /** Before the grant's transaction: the revocation commits first, and the grant must be refused. */
  const before = new Pause();
  /** Inside the grant's transaction, code or token used, tokens not yet stored: the revocation must end them. */
  const during = new Pause();
  const beforeCode = new Pause();

  beforeAll(async () => {
    app = await openFlowApp(kind, { OAUTH_PASSWORD_GRANT: 'enabled' }, { beforeGrantCommit: before.seam, duringGrantCommit: during.seam, beforeCodeIssued: beforeCode.seam });
    web = await createWebClient(app.db);
  });
  afterAll(() => app.close());

  /** A browser signed in as the user, and the user's tokens for the web client. */
  async function signedInWithTokens(user: UserRecord): Promise<{ browser: Browser; tokens: TokenResponse }> {
    const browser = new Browser(app.oauth.app);
    const { code, verifier } = await obtainCode(app, browser, web, user, { scope: SCOPE });
    const tokens = expectTokens(await exchangeCode(app, web, code, { code_verifier: verifier }), { scope: SCOPE, refreshToken: true, idToken: true });
    return { browser, tokens };
  }

  const userinfo = (token: string) => app.oauth.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${token}` } });
  const introspect = (token: string) =>
    app.oauth.app.inject({ method: 'POST', url: '/oauth/introspect', headers: { ...FORM, authorization: basic(web.client.clientId, web.secret) }, payload: form({ token }) });

  /** Everything a holder of these tokens could try: the API refuses the access token, refresh is refused, introspection says inactive. */
  async function expectDead(tokens: TokenResponse): Promise<void> {
    const api = await userinfo(tokens.access_token);
    expect(api.statusCode).toBe(401);
    expect(api.headers['www-authenticate']).toContain('error="invalid_token"');
    expectTokenError(await refresh(app, web, tokens.refresh_token!), 400, 'invalid_grant', REFRESH_REVOKED);
    for (const token of [tokens.access_token, tokens.refresh_token!]) {
      const answer = await introspect(token);
      expect({ status: answer.statusCode, body: answer.json() }).toEqual({ status: 200, body: { active: false } });
    }
  }

  async function expectAlive(tokens: TokenResponse): Promise<void> {
    expect((await userinfo(tokens.access_token)).statusCode).toBe(200);
    expect((await introspect(tokens.access_token)).json()).toMatchObject({ active: true });
  }

  /** No row of the user's (to the registration, when given) that could still authenticate or be redeemed. */
  async function expectNothingLive(userId: string, clientRegistrationId?: string): Promise<void> {
    const db = app.db.kysely;
    let access = db.selectFrom('accessTokens').select('jti').where('subject', '=', userId).where('revokedAt', 'is', null);
    let refreshes = db.selectFrom('refreshTokens').select('tokenHash').where('userId', '=', userId).where('revokedAt', 'is', null).where('rotatedAt', 'is', null);
    let codes = db.selectFrom('authorizationCodes').select('codeHash').where('userId', '=', userId).where('redeemedAt', 'is', null);
    if (clientRegistrationId !== undefined) {
      access = access.where('clientRegistrationId', '=', clientRegistrationId);
      refreshes = refreshes.where('clientRegistrationId', '=', clientRegistrationId);
      codes = codes.where('clientRegistrationId', '=', clientRegistrationId);
    }
    expect({ access: await access.execute(), refresh: await refreshes.execute(), codes: await codes.execute() }).toEqual({ access: [], refresh: [], codes: [] });
  }

  /**
   * Runs the grant, holds it at `pause`, revokes, lets it go. Before the grant's transaction the revocation
   * completes first; during it the revocation must wait for the grant's locks (on SQLite, for the one
   * connection) and then end what the grant stored.
   */
  async function race(pause: Pause, grant: () => Promise<Reply>, revoke: () => Promise<unknown>): Promise<Reply> {
    const gate = pause.arm();
    const pending = grant();
    await gate.reached;
    if (pause === before || pause === beforeCode) {
      await revoke();
      gate.release();
      return pending;
    }
    const revoked = revoke();
    if (kind === 'postgres') await waitingOrDone(revoked);
    gate.release();
    const [reply] = await Promise.all([pending, revoked]);
    return reply;
  }

  /**
   * Until the revocation waits for a lock (PostgreSQL shows it in pg_stat_activity) or has finished without
   * waiting: released before that, the grant could commit before the revocation even began.
   */
  async function waitingOrDone(revocation: Promise<unknown>): Promise<void> {
    let done = false;
    revocation.then(() => (done = true), () => (done = true));
    const deadline = Date.now() + 10_000;
    while (!done) {
      const waiting = await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(app.db.kysely);
      if (waiting.rows.length > 0) return;
      if (Date.now() > deadline) throw new Error('the revocation neither waited nor finished');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  const changePassword = async (browser: Browser) => {
    const fields = formFields((await browser.get('/oauth/account')).body, '/oauth/account/password');
    return async () => {
      const done = await browser.post('/oauth/account/password', { csrf_token: fields.csrf_token!, current_password: PASSWORD, new_password: `new passphrase ${newId()}` });
      expect(done.body).toContain('Your password was changed.');
    };
  };
  const signOutEverywhere = async (browser: Browser) => {
    const fields = formFields((await browser.get('/oauth/account')).body, '/oauth/account/sign-out-everywhere');
    return async () => {
      const done = await browser.post('/oauth/account/sign-out-everywhere', { csrf_token: fields.csrf_token! });
      expect(done.statusCode).toBe(200);
    };
  };
  /** Withdraws consent to the application (a client registration id), or to the first one the account page lists. */
  const withdrawConsent = async (browser: Browser, application?: string) => {
    const page = (await browser.get('/oauth/account')).body;
    const fields = application === undefined ? formFields(page, '/oauth/account/applications/revoke') : applicationForm(page, application);
    return async () => {
      const done = await browser.post('/oauth/account/applications/revoke', { csrf_token: fields.csrf_token!, application: fields.application! });
      expect(done.body).toContain('The application no longer has access.');
    };
  };
  const applicationForm = (page: string, application: string) => {
    const at = page.indexOf(`name="application" value="${application}"`);
    expect(at, application).toBeGreaterThan(0);
    const start = page.lastIndexOf('<form', at);
    return hiddenInputs(page.slice(start, page.indexOf('</form>', at)));
  };

  /** PUT /v1/users/{id} by an administrator, through the operation's handler. */
  async function setActive(user: UserRecord, active: boolean): Promise<void> {
    const admin: TokenPrincipal = {
      kind: 'user',
      subject: 'admin',
      id: 'admin',
      role: 'admin',
      clientId: 'admin-console',
      clientRegistrationId: 'admin-console-registration',
      clientRateLimit: null,
      scopes: new Set(['read:users', 'write:users']),
      token: { jti: newId(), format: 'jwt', grantType: 'authorization_code', issuedAt: 0, expiresAt: 0 },
    };
    const resource = await app.db.kysely.selectFrom('users').selectAll().where('id', '=', user.id).executeTakeFirstOrThrow();
    const deps = { db: app.db.kysely, sqlite: null, policy, resources, publishedSpec: '', graphqlSdl: '', events: new InProcessEventBus(),
      defaultAccessTokenTtl: 600, replacement: replacementContracts(routes), invalidateSubject: (id: string) => app.oauth.tokens.evictSubject(id) };
    await handlers.replaceUser(
      { params: { userId: user.id }, query: {}, body: { email: user.email, name: user.name, role: user.role, active } } as never,
      { principal: admin, resource: resource as never, deps, loaders: new ResourceLoaders({ ...deps }) },
    );
  }

  for (const [position, pause] of [['before', before], ['during', during]] as const) {
    const expectRaced = async (reply: Reply, refused: string, issued?: (tokens: TokenResponse) => Promise<void>) => {
      if (position === 'before') return expectTokenError(reply, 400, 'invalid_grant', refused);
      const tokens = expectTokens(reply, { scope: SCOPE, refreshToken: true, idToken: true });
      await expectDead(tokens);
      await issued?.(tokens);
    };

    /** Before: the password was checked when the revocation committed, and the grant is refused; during: its tokens are revoked. */
    const expectPasswordGrantRaced = async (reply: Reply, legacy: TestClient) => {
      if (position === 'before') return expectTokenError(reply, 400, 'invalid_grant', 'The account changed during the request; sign in again.');
      const tokens = expectTokens(reply, { scope: 'read:posts offline_access', refreshToken: true, idToken: false });
      expect((await userinfo(tokens.access_token)).statusCode).toBe(401);
      expectTokenError(await tokenRequest(app, legacy, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }), 400, 'invalid_grant', REFRESH_REVOKED);
    };

    describe(`the revocation ${position === 'before' ? 'committing before the grant\'s transaction' : 'arriving while the grant\'s transaction holds its locks'}`, () => {
      it('a refresh racing a password change: its tokens never work', async () => {
        const user = await createUser(app.db);
        const { browser, tokens } = await signedInWithTokens(user);
        const reply = await race(pause, () => refresh(app, web, tokens.refresh_token!), await changePassword(browser));
        await expectRaced(reply, REFRESH_REVOKED);
        await expectDead(tokens);
        await expectNothingLive(user.id);
      });

      it('a refresh racing sign-out everywhere: its tokens never work', async () => {
        const user = await createUser(app.db);
        const { browser, tokens } = await signedInWithTokens(user);
        const reply = await race(pause, () => refresh(app, web, tokens.refresh_token!), await signOutEverywhere(browser));
        await expectRaced(reply, REFRESH_REVOKED);
        await expectNothingLive(user.id);
      });

      it('a refresh racing the withdrawal of consent: its tokens never work', async () => {
        const user = await createUser(app.db);
        const { browser, tokens } = await signedInWithTokens(user);
        const reply = await race(pause, () => refresh(app, web, tokens.refresh_token!), await withdrawConsent(browser));
        await expectRaced(reply, REFRESH_REVOKED);
        await expectNothingLive(user.id, web.client.id);
      });

      it('a refresh racing deactivation: its tokens never work, not even once the user is active again', async () => {
        const user = await createUser(app.db);
        const { tokens } = await signedInWithTokens(user);
        const reply = await race(pause, () => refresh(app, web, tokens.refresh_token!), () => setActive(user, false));
        let racing: TokenResponse | null = null;
        await expectRaced(reply, REFRESH_REVOKED, async (issued) => {
          racing = issued;
        });
        await setActive(user, true);
        await expectDead(tokens);
        if (racing !== null) await expectDead(racing);
        await expectNothingLive(user.id);
      });

      it('a code exchange racing sign-out everywhere: its tokens never work', async () => {
        const user = await createUser(app.db);
        const browser = new Browser(app.oauth.app);
        const { code, verifier } = await obtainCode(app, browser, web, user, { scope: SCOPE });
        const reply = await race(pause, () => exchangeCode(app, web, code, { code_verifier: verifier }), await signOutEverywhere(browser));
        await expectRaced(reply, CODE_ENDED);
        await expectNothingLive(user.id);
      });

      it('a refresh racing a secret rotation that revokes the client\'s tokens: its tokens never work', async () => {
        const user = await createUser(app.db);
        const client = await createWebClient(app.db, { name: 'Rotated App' });
        const browser = new Browser(app.oauth.app);
        const { code, verifier } = await obtainCode(app, browser, client, user, { scope: SCOPE });
        const tokens = expectTokens(await exchangeCode(app, client, code, { code_verifier: verifier }), { scope: SCOPE, refreshToken: true, idToken: true });
        // What `clients rotate-secret --revoke-tokens` commits.
        const rotate = () =>
          app.db.kysely.transaction().execute(async (trx) => {
            await trx.updateTable('clients').set({ secretHash: digestSecret(generateSecret()), updatedAt: nowIso() }).where('id', '=', client.client.id).execute();
            await revokeClientTokens(trx, client.client.clientId, nowIso());
          });
        const reply = await race(pause, () => refresh(app, client, tokens.refresh_token!), rotate);
        if (position === 'before') {
          expectTokenError(reply, 400, 'invalid_grant', 'The client registration changed during the request; send it again.');
        } else {
          const issued = expectTokens(reply, { scope: SCOPE, refreshToken: true, idToken: true });
          expect((await userinfo(issued.access_token)).statusCode).toBe(401);
        }
        await expectNothingLive(user.id, client.client.id);
      });

      it('a device code redeemed while the user signs out everywhere: its tokens never work', async () => {
        const user = await createUser(app.db);
        const tv = await createClient(app.db, { name: 'Living-room TV', type: 'public', secretHash: null, grantTypes: [DEVICE_GRANT, 'refresh_token'], scopes: ['read:posts', 'offline_access'], role: null });
        const started = (await app.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: FORM, payload: form({ client_id: tv.client.clientId, scope: DEVICE_SCOPE }) })).json() as { device_code: string; user_code: string };
        const browser = new Browser(app.oauth.app);
        const login = await browser.visit(`/oauth/device?user_code=${started.user_code}`);
        const consent = await browser.submit('/oauth/login', { ...hiddenInputs(login.body), email: user.email, password: PASSWORD });
        const done = await browser.submit('/oauth/device', [...Object.entries(hiddenInputs(consent.body)), ['scope', 'read:posts'], ['scope', 'offline_access'], ['decision', 'allow']]);
        expect(done.statusCode).toBe(200);
        const poll = () => app.oauth.app.inject({ method: 'POST', url: '/oauth/token', headers: FORM, payload: form({ grant_type: DEVICE_GRANT, device_code: started.device_code, client_id: tv.client.clientId }) });
        const reply = await race(pause, poll, await signOutEverywhere(browser));
        if (position === 'before') {
          expectTokenError(reply, 400, 'access_denied', 'The user denied the request.');
        } else {
          const tokens = expectTokens(reply, { scope: DEVICE_SCOPE, refreshToken: true, idToken: false });
          expect((await userinfo(tokens.access_token)).statusCode).toBe(401);
          expectTokenError(await tokenRequest(app, tv, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }), 400, 'invalid_grant', REFRESH_REVOKED);
        }
        await expectNothingLive(user.id);
      });

      it('a password grant racing sign-out everywhere: its tokens never work', async () => {
        const user = await createUser(app.db);
        const legacy = await createClient(app.db, { name: 'Legacy app', legacy: true, grantTypes: ['password', 'refresh_token'], scopes: ['read:posts', 'offline_access'], role: null });
        const { browser } = await signedInWithTokens(user);
        const grant = () => tokenRequest(app, legacy, { grant_type: 'password', username: user.email, password: PASSWORD });
        const reply = await race(pause, grant, await signOutEverywhere(browser));
        await expectPasswordGrantRaced(reply, legacy);
        await expectNothingLive(user.id);
      });

      it('a password grant racing the withdrawal of consent to that application: its tokens never work', async () => {
        const user = await createUser(app.db);
        const legacy = await createClient(app.db, { name: 'Legacy app', legacy: true, grantTypes: ['password', 'refresh_token'], scopes: ['read:posts', 'offline_access'], role: null });
        const { browser } = await signedInWithTokens(user);
        // The application holds a grant of the user's, so the account page lists it to withdraw.
        const grant = () => tokenRequest(app, legacy, { grant_type: 'password', username: user.email, password: PASSWORD });
        expectTokens(await grant(), { scope: 'read:posts offline_access', refreshToken: true, idToken: false });
        const reply = await race(pause, grant, await withdrawConsent(browser, legacy.client.id));
        await expectPasswordGrantRaced(reply, legacy);
        await expectNothingLive(user.id, legacy.client.id);
      });

      it('a password grant racing a change of that password: its tokens never work', async () => {
        const user = await createUser(app.db);
        const legacy = await createClient(app.db, { name: 'Legacy app', legacy: true, grantTypes: ['password', 'refresh_token'], scopes: ['read:posts', 'offline_access'], role: null });
        const { browser } = await signedInWithTokens(user);
        const grant = () => tokenRequest(app, legacy, { grant_type: 'password', username: user.email, password: PASSWORD });
        const reply = await race(pause, grant, await changePassword(browser));
        if (position === 'before') {
          expectTokenError(reply, 400, 'invalid_grant', 'The account changed during the request; sign in again.');
        } else {
          const tokens = expectTokens(reply, { scope: 'read:posts offline_access', refreshToken: true, idToken: false });
          expect((await userinfo(tokens.access_token)).statusCode).toBe(401);
          expectTokenError(await tokenRequest(app, legacy, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }), 400, 'invalid_grant', REFRESH_REVOKED);
        }
        await expectNothingLive(user.id);
      });
    });
  }

  it('lets a grant held at either seam through when nothing is revoked meanwhile', async () => {
    const user = await createUser(app.db);
    const { tokens } = await signedInWithTokens(user);
    const first = expectTokens(await race(before, () => refresh(app, web, tokens.refresh_token!), async () => {}), { scope: SCOPE, refreshToken: true, idToken: true });
    const second = expectTokens(await race(during, () => refresh(app, web, first.refresh_token!), async () => {}), { scope: SCOPE, refreshToken: true, idToken: true });
    await expectAlive(second);
  });

  it('ends the family when a spent refresh token is replayed while its holder refreshes: the holder\'s new tokens never work', async () => {
    const user = await createUser(app.db);
    const { tokens: first } = await signedInWithTokens(user);
    const second = expectTokens(await refresh(app, web, first.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: true });
    // The holder's refresh with the current token is inside its transaction (token used, new tokens not yet
    // stored) when the spent one comes back: the revocation of the family must wait and then end them too.
    const reply = await race(during, () => refresh(app, web, second.refresh_token!), async () => {
      expectTokenError(await refresh(app, web, first.refresh_token!), 400, 'invalid_grant', 'The refresh token was already used; its family is revoked.');
    });
    const third = expectTokens(reply, { scope: SCOPE, refreshToken: true, idToken: true });
    await expectDead(third);
    await expectNothingLive(user.id);
  });

  it('leaves another user\'s refresh, held inside its transaction, alone when one user signs out everywhere', async () => {
    const [leaving, staying] = [await createUser(app.db), await createUser(app.db)];
    const { browser } = await signedInWithTokens(leaving);
    const { tokens } = await signedInWithTokens(staying);
    const reply = await race(during, () => refresh(app, web, tokens.refresh_token!), await signOutEverywhere(browser));
    const issued = expectTokens(reply, { scope: SCOPE, refreshToken: true, idToken: true });
    await expectAlive(issued);
    await expectNothingLive(leaving.id);
  });

  it('refuses a refresh whose client registration changed meanwhile, without using up its token', async () => {
    const user = await createUser(app.db);
    const client = await createWebClient(app.db, { name: 'Renamed App' });
    const { code, verifier } = await obtainCode(app, new Browser(app.oauth.app), client, user, { scope: SCOPE });
    const tokens = expectTokens(await exchangeCode(app, client, code, { code_verifier: verifier }), { scope: SCOPE, refreshToken: true, idToken: true });
    const rename = () => app.db.kysely.updateTable('clients').set({ name: 'Renamed App 2', updatedAt: nowIso() }).where('id', '=', client.client.id).execute();
    const reply = await race(before, () => refresh(app, client, tokens.refresh_token!), rename);
    expectTokenError(reply, 400, 'invalid_grant', 'The client registration changed during the request; send it again.');
    // Rolled back: the same refresh token still works once, under the registration as it is now.
    expectTokens(await refresh(app, client, tokens.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: true });
  });

  it('issues no code once the user signed out everywhere while the consent was being answered', async () => {
    const user = await createUser(app.db);
    const browser = new Browser(app.oauth.app);
    await obtainCode(app, browser, web, user, { scope: 'read:posts' });
    const stop = await signOutEverywhere(browser);
    const consentPage = await browser.visit(authorizeUrl(web, { scope: SCOPE, pkce: pkce() }));
    const reply = await race(beforeCode, () => answerConsent(browser, consentPage), stop);
    expectErrorRedirect(reply, app.config.issuer, 'access_denied', 'The user signed out before the request was answered.');
    await expectNothingLive(user.id);
    // The control: with no sign-out in between the same steps give a code.
    const again = new Browser(app.oauth.app);
    const login = await again.visit(authorizeUrl(web, { scope: SCOPE, pkce: pkce(), extra: { prompt: 'consent' } }));
    const consent = await signIn(again, login, user.email);
    const granted = await race(beforeCode, () => answerConsent(again, consent), async () => {});
    expect(new URL(String(granted.headers.location)).searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('records no device approval once the user signed out everywhere while answering the device', async () => {
    const user = await createUser(app.db);
    const tv = await createClient(app.db, { name: 'Kitchen TV', type: 'public', secretHash: null, grantTypes: [DEVICE_GRANT, 'refresh_token'], scopes: ['read:posts', 'offline_access'], role: null });
    const started = (await app.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: FORM, payload: form({ client_id: tv.client.clientId, scope: DEVICE_SCOPE }) })).json() as { device_code: string; user_code: string };
    const { browser } = await signedInWithTokens(user);
    const stop = await signOutEverywhere(browser);
    const consent = await browser.visit(`/oauth/device?user_code=${started.user_code}`);
    const fields: [string, string][] = [...Object.entries(hiddenInputs(consent.body)), ['scope', 'read:posts'], ['scope', 'offline_access'], ['decision', 'allow']];
    const reply = await race(beforeCode, () => browser.post('/oauth/device', fields), stop);
    // Signed out: the browser is sent to sign in again, and nothing was approved.
    expect({ status: reply.statusCode, location: reply.headers.location }).toEqual({ status: 303, location: `/oauth/login?user_code=${started.user_code}` });
    const row = await app.db.kysely.selectFrom('deviceCodes').select(['status', 'userId']).where('userCode', '=', started.user_code.replace('-', '')).executeTakeFirstOrThrow();
    expect(row).toEqual({ status: 'pending', userId: null });
    const poll = await app.oauth.app.inject({ method: 'POST', url: '/oauth/token', headers: FORM, payload: form({ grant_type: DEVICE_GRANT, device_code: started.device_code, client_id: tv.client.clientId }) });
    expectTokenError(poll, 400, 'authorization_pending', 'The user has not answered yet.');
  });

  it('leaves no token alive when sign-out everywhere lands among 30 refreshes in flight', async () => {
    const user = await createUser(app.db);
    const { browser } = await signedInWithTokens(user);
    const stop = await signOutEverywhere(browser);
    // Thirty refresh families of the user, as thirty code exchanges would have left them.
    const families = await Promise.all(
      Array.from({ length: 30 }, async () => {
        const token = generateSecret();
        const now = Date.now();
        await insertRefreshToken(app.db.kysely, {
          tokenHash: digestSecret(token),
          familyId: newId(),
          clientId: web.client.clientId,
          clientRegistrationId: web.client.id,
          userId: user.id,
          scopes: SCOPE,
          authTime: new Date(now).toISOString(),
          issuedAt: new Date(now).toISOString(),
          expiresAt: new Date(now + 3600_000).toISOString(),
          rotatedAt: null,
          revokedAt: null,
        });
        return token;
      }),
    );
    let answered = 0;
    let revokeNow!: () => void;
    const tenAnswered = new Promise<void>((resolve) => (revokeNow = resolve));
    const replies = families.map((token) =>
      refresh(app, web, token).then((reply) => {
        if (++answered === 10) revokeNow();
        return reply;
      }),
    );
    await tenAnswered;
    await stop();
    const settled = await Promise.all(replies);
    let issued = 0;
    for (const reply of settled) {
      if (reply.statusCode === 200) {
        issued += 1;
        await expectDead(reply.json() as TokenResponse);
      } else {
        expectTokenError(reply, 400, 'invalid_grant', REFRESH_REVOKED);
      }
    }
    expect(issued).toBeGreaterThanOrEqual(10);
    await expectNothingLive(user.id);
  });
});
