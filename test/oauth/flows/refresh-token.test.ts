import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestSecret, tokenLookupKey } from '../../../src/oauth/secrets.js';
import { revokeClientTokens, revokeUserTokens } from '../../../src/oauth/tokens/access-token-records.js';
import { newId, nowIso } from '../../../src/storage/ids.js';
import type { UserRecord } from '../../../src/storage/users.js';
import { insertClient } from '../../../src/storage/clients.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import type { TestClient } from '../fixtures.js';
import { Browser } from './browser.js';
import {
  countRows,
  createNativeClient,
  createUser,
  createWebClient,
  exchangeCode,
  expectTokenError,
  expectTokens,
  obtainCode,
  openFlowApp,
  refresh,
  type AuthorizeOptions,
  type FlowApp,
  type TokenResponse,
} from './flow.js';

const TWO_DAYS = 2 * 86400;
const REUSED = 'The refresh token was already used; its family is revoked.';
const REVOKED = 'The refresh token was revoked.';
const SCOPE = 'read:posts write:posts';

describe.each(DATABASE_KINDS)('refresh tokens on %s', (kind) => {
  let t: FlowApp;
  let user: UserRecord;
  let web: TestClient;
  let signedIn: Browser;

  beforeAll(async () => {
    t = await openFlowApp(kind, { REFRESH_TOKEN_TTL: String(TWO_DAYS) });
    user = await createUser(t.db);
    // First-party: consent is not what this suite is about.
    web = await createWebClient(t.db, { firstParty: true });
    signedIn = new Browser(t.oauth.app);
    await obtainCode(t, signedIn, web, user);
  });
  afterAll(async () => {
    await t.close();
  });

  /** Code, exchange, and the token response (with a refresh token unless `refreshToken: false`). */
  async function tokensFor(client: TestClient, options: AuthorizeOptions & { refreshToken?: boolean; idToken?: boolean; browser?: Browser } = {}): Promise<TokenResponse> {
    const { code, verifier } = await obtainCode(t, options.browser ?? signedIn, client, user, options);
    const reply = await exchangeCode(t, client, code, { code_verifier: verifier });
    return expectTokens(reply, { scope: options.scope ?? SCOPE, refreshToken: options.refreshToken ?? true, idToken: options.idToken ?? false });
  }

  async function expectRevoked(accessToken: string): Promise<void> {
    await expect(t.oauth.tokens.verifyAccessToken(accessToken)).rejects.toMatchObject({ name: 'InvalidTokenError' });
  }

  describe('rotation', () => {
    it('issues a new refresh token each time; the old one presented again revokes the whole family, newest tokens included', async () => {
      const first = await tokensFor(web);
      const second = expectTokens(await refresh(t, web, first.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: false });
      expect(second.refresh_token).not.toBe(first.refresh_token);
      expect(second.access_token).not.toBe(first.access_token);
      const third = expectTokens(await refresh(t, web, second.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: false });
      const newest = await t.oauth.tokens.verifyAccessToken(third.access_token);
      expect(newest).toMatchObject({ subject: user.id, grantType: 'refresh_token', scopes: ['read:posts', 'write:posts'] });

      const issued = await countRows(t.db, 'accessTokens');
      expectTokenError(await refresh(t, web, first.refresh_token!), 400, 'invalid_grant', REUSED);
      expect(await countRows(t.db, 'accessTokens')).toBe(issued);
      expectTokenError(await refresh(t, web, third.refresh_token!), 400, 'invalid_grant', REVOKED);
      for (const token of [first, second, third]) await expectRevoked(token.access_token);
      expect(t.oauth.decisions).toContainEqual(
        expect.objectContaining({ operation: 'token', subject: user.id, clientId: web.client.clientId, resourceType: 'grant', resourceId: newest.grantId, decision: 'deny', reason: 'reuse' }),
      );
    });

    it('lets exactly one of two concurrent refreshes with the same token win, and then revokes the family', async () => {
      const first = await tokensFor(web);
      const replies = await Promise.all([refresh(t, web, first.refresh_token!), refresh(t, web, first.refresh_token!)]);
      expect(replies.map((reply) => reply.statusCode).sort()).toEqual([200, 400]);
      const winner = replies.find((reply) => reply.statusCode === 200)!.json() as TokenResponse;
      expectTokenError(replies.find((reply) => reply.statusCode === 400)!, 400, 'invalid_grant', REUSED);
      expectTokenError(await refresh(t, web, winner.refresh_token!), 400, 'invalid_grant', REVOKED);
      await expectRevoked(winner.access_token);
      await expectRevoked(first.access_token);
    });

    it('finds a refresh token only by the whole token: its random part alone, or under another time prefix, is no token', async () => {
      const { refresh_token: token, access_token: access } = await tokensFor(web);
      const prefix = token!.slice(0, 12);
      const random = token!.slice(12);
      const otherTime = (parseInt(prefix, 16) + 1).toString(16).padStart(12, '0');
      const variants = [random, `${otherTime}${random}`, `${prefix.toUpperCase()}${random}`, `${prefix}${random.slice(1)}A`, `${token}`.slice(0, 54)];
      const issued = await countRows(t.db, 'accessTokens');
      for (const variant of variants) {
        expectTokenError(await refresh(t, web, variant), 400, 'invalid_grant', 'The refresh token is not valid.');
      }
      expect(await countRows(t.db, 'accessTokens')).toBe(issued);
      // None of them touched the family: the real token still rotates, and its access token still works.
      await expect(t.oauth.tokens.verifyAccessToken(access)).resolves.toMatchObject({ subject: user.id });
      expectTokens(await refresh(t, web, token!), { scope: SCOPE, refreshToken: true, idToken: false });
    });

    it('finds an opaque access token only by the whole token', async () => {
      const opaque = await createWebClient(t.db, { firstParty: true, accessTokenFormat: 'opaque' });
      const { access_token: token } = await tokensFor(opaque);
      expect(token).toMatch(/^[0-9a-f]{12}[A-Za-z0-9_-]{43}$/);
      const prefix = token.slice(0, 12);
      const random = token.slice(12);
      const otherTime = (parseInt(prefix, 16) - 1).toString(16).padStart(12, '0');
      for (const variant of [random, `${otherTime}${random}`, `${prefix.toUpperCase()}${random}`]) {
        await expect(t.oauth.tokens.verifyAccessToken(variant)).rejects.toMatchObject({ name: 'InvalidTokenError' });
      }
      // A 43-character token from before the prefix is keyed by its digest: the random part's digest is no key either.
      expect(await t.db.kysely.selectFrom('accessTokens').select('jti').where('tokenHash', '=', digestSecret(random)).execute()).toEqual([]);
      await expect(t.oauth.tokens.verifyAccessToken(token)).resolves.toMatchObject({ subject: user.id, format: 'opaque' });
    });

    it('stores refresh tokens as digests behind their time prefix, with the configured lifetime', async () => {
      const { refresh_token: token } = await tokensFor(web);
      const row = await t.db.kysely.selectFrom('refreshTokens').selectAll().where('tokenHash', '=', `${token!.slice(0, 12)}${digestSecret(token!)}`).executeTakeFirstOrThrow();
      expect(Math.abs(parseInt(token!.slice(0, 12), 16) - Date.parse(row.issuedAt))).toBeLessThan(1000);
      expect(Date.parse(row.expiresAt) - Date.parse(row.issuedAt)).toBe(TWO_DAYS * 1000);
      const stored = await t.db.kysely.selectFrom('refreshTokens').selectAll().execute();
      expect(JSON.stringify(stored)).not.toContain(token);
    });

    it('refuses an expired refresh token', async () => {
      const { refresh_token: token } = await tokensFor(web);
      await t.db.kysely.updateTable('refreshTokens').set({ expiresAt: new Date(Date.now() - 1000).toISOString() }).where('tokenHash', '=', tokenLookupKey(token!)).execute();
      const issued = await countRows(t.db, 'accessTokens');
      expectTokenError(await refresh(t, web, token!), 400, 'invalid_grant', 'The refresh token has expired.');
      expect(await countRows(t.db, 'accessTokens')).toBe(issued);
    });
  });

  describe('scope', () => {
    it('narrows the access token on request while the family keeps its scopes', async () => {
      const first = await tokensFor(web);
      const narrow = expectTokens(await refresh(t, web, first.refresh_token!, { scope: 'read:posts' }), { scope: 'read:posts', refreshToken: true, idToken: false });
      await expect(t.oauth.tokens.verifyAccessToken(narrow.access_token)).resolves.toMatchObject({ scopes: ['read:posts'] });
      expectTokens(await refresh(t, web, narrow.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: false });
    });

    it('refuses a wider scope with invalid_scope, and the refresh token stays usable', async () => {
      const first = await tokensFor(web, { scope: 'read:posts' });
      const issued = await countRows(t.db, 'accessTokens');
      const wider = await refresh(t, web, first.refresh_token!, { scope: 'read:posts write:posts' });
      expectTokenError(wider, 400, 'invalid_scope', 'The refresh token may not request: write:posts.');
      expect(await countRows(t.db, 'accessTokens')).toBe(issued);
      // A refused request is no use of the token (RFC 6749 §5.2): the client goes on with it.
      expectTokens(await refresh(t, web, first.refresh_token!), { scope: 'read:posts', refreshToken: true, idToken: false });
    });

    it('still treats a replayed refresh token as reuse when it asks for a wider scope', async () => {
      const first = await tokensFor(web, { scope: 'read:posts' });
      const second = expectTokens(await refresh(t, web, first.refresh_token!), { scope: 'read:posts', refreshToken: true, idToken: false });
      expectTokenError(await refresh(t, web, first.refresh_token!, { scope: 'read:posts write:posts' }), 400, 'invalid_grant', REUSED);
      expectTokenError(await refresh(t, web, second.refresh_token!), 400, 'invalid_grant', REVOKED);
    });

    it('refuses a malformed scope without spending the refresh token', async () => {
      const first = await tokensFor(web);
      expectTokenError(await refresh(t, web, first.refresh_token!, { scope: 'read:posts  x' }), 400, 'invalid_scope', 'The scope parameter is malformed.');
      expectTokens(await refresh(t, web, first.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: false });
    });
  });

  describe('who gets a refresh token', () => {
    it('not a public browser-based client (https redirect URI), though registered for the grant', async () => {
      const spa = await createWebClient(t.db, { type: 'public', secretHash: null, firstParty: true, redirectUris: ['https://spa.example/callback'] });
      const before = await countRows(t.db, 'refreshTokens');
      await tokensFor(spa, { refreshToken: false });
      expect(await countRows(t.db, 'refreshTokens')).toBe(before);
    });

    it('a public native client on a loopback redirect URI, which refreshes with client_id alone', async () => {
      const native = await createNativeClient(t.db, { firstParty: true });
      const tokens = await tokensFor(native);
      expectTokens(await refresh(t, native, tokens.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: false });
    });

    it('not a confidential client without the refresh_token grant, which may not use the grant either', async () => {
      const codeOnly = await createWebClient(t.db, { grantTypes: ['authorization_code'], firstParty: true });
      await tokensFor(codeOnly, { refreshToken: false });
      const someone = await tokensFor(web);
      expectTokenError(await refresh(t, codeOnly, someone.refresh_token!), 400, 'unauthorized_client', 'The client may not use the refresh_token grant.');
    });

    it('with openid, only when offline_access was granted (OpenID Connect Core §11)', async () => {
      await tokensFor(web, { scope: 'openid read:posts', refreshToken: false, idToken: true });
      const offline = await tokensFor(web, { scope: 'openid offline_access read:posts', refreshToken: true, idToken: true });
      expectTokens(await refresh(t, web, offline.refresh_token!), { scope: 'openid offline_access read:posts', refreshToken: true, idToken: true });
    });
  });

  describe('ends', () => {
    it('when the user’s tokens are revoked (deactivation)', async () => {
      const other = await createUser(t.db);
      const browser = new Browser(t.oauth.app);
      const { code, verifier } = await obtainCode(t, browser, web, other);
      const tokens = expectTokens(await exchangeCode(t, web, code, { code_verifier: verifier }), { scope: SCOPE, refreshToken: true, idToken: false });
      await t.oauth.tokens.verifyAccessToken(tokens.access_token);
      await t.db.kysely.transaction().execute(async (trx) => {
        await trx.updateTable('users').set({ active: false }).where('id', '=', other.id).execute();
        await revokeUserTokens(trx, other.id, nowIso());
      });
      t.oauth.tokens.evictSubject(other.id);
      expectTokenError(await refresh(t, web, tokens.refresh_token!), 400, 'invalid_grant', REVOKED);
      await expectRevoked(tokens.access_token);
    });

    it('when the user is no longer active, even before the tokens are revoked', async () => {
      const other = await createUser(t.db);
      const { code, verifier } = await obtainCode(t, new Browser(t.oauth.app), web, other);
      const tokens = expectTokens(await exchangeCode(t, web, code, { code_verifier: verifier }), { scope: SCOPE, refreshToken: true, idToken: false });
      await t.db.kysely.updateTable('users').set({ active: false }).where('id', '=', other.id).execute();
      const issued = await countRows(t.db, 'accessTokens');
      expectTokenError(await refresh(t, web, tokens.refresh_token!), 400, 'invalid_grant', 'The user can no longer sign in.');
      expect(await countRows(t.db, 'accessTokens')).toBe(issued);
    });

    it('at the sign-in’s maximum lifetime (REFRESH_TOKEN_MAX_LIFETIME, 90 days), however often rotated', async () => {
      const tokens = await tokensFor(web);
      const row = async (refreshToken: string) =>
        t.db.kysely.selectFrom('refreshTokens').select(['familyId', 'authTime', 'expiresAt']).where('tokenHash', '=', tokenLookupKey(refreshToken)).executeTakeFirstOrThrow();
      const { familyId } = await row(tokens.refresh_token!);
      // The sign-in the family comes from was 90 days less a minute ago: a rotation now ends with it.
      const signedInAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 90 * 86400_000 + 60_000).toISOString();
      await t.db.kysely.updateTable('refreshTokens').set({ authTime: signedInAt }).where('familyId', '=', familyId).execute();
      const rotated = expectTokens(await refresh(t, web, tokens.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: false });
      expect(await row(rotated.refresh_token!)).toEqual({ familyId, authTime: signedInAt, expiresAt: new Date(Date.parse(signedInAt) + 90 * 86400_000).toISOString() });
      // Past it (the lifetime lowered since the token was issued, say): refused, nothing issued.
      await t.db.kysely.updateTable('refreshTokens').set({ authTime: new Date(Date.now() - 90 * 86400_000 - 1000).toISOString() }).where('familyId', '=', familyId).execute();
      const issued = await countRows(t.db, 'accessTokens');
      expectTokenError(await refresh(t, web, rotated.refresh_token!), 400, 'invalid_grant', 'The refresh token has expired.');
      expect(await countRows(t.db, 'accessTokens')).toBe(issued);
    });

    it('when the client is deleted, and a new registration under the same client_id cannot use it', async () => {
      const doomed = await createWebClient(t.db, { firstParty: true });
      const tokens = await tokensFor(doomed);
      await t.db.kysely.transaction().execute(async (trx) => {
        await revokeClientTokens(trx, doomed.client.clientId, nowIso());
        await trx.deleteFrom('clients').where('id', '=', doomed.client.id).execute();
      });
      // The registration held in memory goes when the deletion's invalidation is read.
      await t.oauth.invalidations.poll();
      expectTokenError(await refresh(t, doomed, tokens.refresh_token!), 401, 'invalid_client', 'Client authentication failed.');
      const reborn = await insertClient(t.db.kysely, { ...doomed.client, id: newId(), secretHash: digestSecret(doomed.secret) }, nowIso());
      await t.oauth.invalidations.poll();
      const again = { ...doomed, client: { ...doomed.client, id: reborn.id } };
      expectTokenError(await refresh(t, again, tokens.refresh_token!), 400, 'invalid_grant', 'The refresh token is not valid.');
    });
  });

  describe('refuses', () => {
    it('another client’s refresh token without spending it', async () => {
      const other = await createWebClient(t.db, { firstParty: true });
      const tokens = await tokensFor(web);
      expectTokenError(await refresh(t, other, tokens.refresh_token!), 400, 'invalid_grant', 'The refresh token is not valid.');
      expectTokens(await refresh(t, web, tokens.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: false });
    });

    it('an unknown refresh token and a missing one', async () => {
      expectTokenError(await refresh(t, web, 'r'.repeat(43)), 400, 'invalid_grant', 'The refresh token is not valid.');
      expectTokenError(await refresh(t, web, ''), 400, 'invalid_request', 'refresh_token is required.');
    });

    it('an access token presented as a refresh token', async () => {
      const tokens = await tokensFor(web);
      expectTokenError(await refresh(t, web, tokens.access_token), 400, 'invalid_grant', 'The refresh token is not valid.');
    });
  });
});
