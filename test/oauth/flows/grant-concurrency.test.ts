/**
 * Concurrent uses of one code or refresh token with no test seam, whatever interleaving the event loop gives
 * (on SQLite they share the turn's commit, each grant in a savepoint): exactly one succeeds, and the grant
 * ends whole, the winner's tokens included.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commitUserGrant } from '../../../src/oauth/grants/grant-commit.js';
import { grantRefreshToken } from '../../../src/oauth/grants/refresh-token.js';
import { signUserTokens } from '../../../src/oauth/tokens/user-tokens.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { basic, form, FORM } from '../oauth-app.js';
import { Browser } from './browser.js';
import type { TestClient } from '../fixtures.js';
import {
  createUser,
  createWebClient,
  exchangeCode,
  expectTokens,
  obtainCode,
  openFlowApp,
  refresh,
  type FlowApp,
  type TokenResponse,
} from './flow.js';
import type { Reply } from './browser.js';

const SCOPE = 'openid offline_access read:posts';

describe.each(DATABASE_KINDS)('concurrent uses of one grant on %s (no seams)', (kind) => {
  let app: FlowApp;
  let web: TestClient;

  beforeAll(async () => {
    app = await openFlowApp(kind, {});
    web = await createWebClient(app.db);
  });
  afterAll(() => app.close());

  const userinfo = (token: string) => app.oauth.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${token}` } });
  const introspect = (token: string) =>
    app.oauth.app.inject({ method: 'POST', url: '/oauth/introspect', headers: { ...FORM, authorization: basic(web.client.clientId, web.secret) }, payload: form({ token }) });

  async function liveRows(userId: string) {
    const db = app.db.kysely;
    const access = await db.selectFrom('accessTokens').select('jti').where('subject', '=', userId).where('revokedAt', 'is', null).execute();
    const refreshes = await db.selectFrom('refreshTokens').select('tokenHash').where('userId', '=', userId).where('revokedAt', 'is', null).where('rotatedAt', 'is', null).execute();
    return { access: access.length, refresh: refreshes.length };
  }

  async function expectDead(tokens: TokenResponse): Promise<void> {
    expect((await userinfo(tokens.access_token)).statusCode).toBe(401);
    expect((await introspect(tokens.access_token)).json()).toEqual({ active: false });
    expect((await refresh(app, web, tokens.refresh_token!)).statusCode).toBe(400);
  }

  async function tokensFor(): Promise<{ userId: string; tokens: TokenResponse }> {
    const user = await createUser(app.db);
    const { code, verifier } = await obtainCode(app, new Browser(app.oauth.app), web, user, { scope: SCOPE });
    const tokens = expectTokens(await exchangeCode(app, web, code, { code_verifier: verifier }), { scope: SCOPE, refreshToken: true, idToken: true });
    return { userId: user.id, tokens };
  }

  function split(replies: Reply[]): { ok: TokenResponse[]; refused: Reply[] } {
    const ok = replies.filter((reply) => reply.statusCode === 200).map((reply) => reply.json() as TokenResponse);
    const refused = replies.filter((reply) => reply.statusCode !== 200);
    return { ok, refused };
  }

  it('one refresh token presented five times at once: one success, four invalid_grant, the family dead', async () => {
    for (let round = 0; round < 4; round++) {
      const { userId, tokens } = await tokensFor();
      const replies = await Promise.all(Array.from({ length: 5 }, () => refresh(app, web, tokens.refresh_token!)));
      const { ok, refused } = split(replies);
      expect(ok.length, `round ${round}`).toBe(1);
      for (const reply of refused) expect({ status: reply.statusCode, error: (reply.json() as { error: string }).error }).toEqual({ status: 400, error: 'invalid_grant' });
      await expectDead(ok[0]!);
      expect(await liveRows(userId)).toEqual({ access: 0, refresh: 0 });
    }
  });

  it('one code exchanged three times at once: one success, the rest invalid_grant, what it issued dead', async () => {
    for (let round = 0; round < 4; round++) {
      const user = await createUser(app.db);
      const { code, verifier } = await obtainCode(app, new Browser(app.oauth.app), web, user, { scope: SCOPE });
      const replies = await Promise.all(Array.from({ length: 3 }, () => exchangeCode(app, web, code, { code_verifier: verifier })));
      const { ok, refused } = split(replies);
      expect(ok.length, `round ${round}`).toBe(1);
      for (const reply of refused) expect(reply.statusCode).toBe(400);
      await expectDead(ok[0]!);
      expect(await liveRows(user.id)).toEqual({ access: 0, refresh: 0 });
    }
  });

  it('a spent refresh token replayed at the same time as the holder refreshes: nothing of the family stays live', async () => {
    for (let round = 0; round < 6; round++) {
      const { userId, tokens: first } = await tokensFor();
      const second = expectTokens(await refresh(app, web, first.refresh_token!), { scope: SCOPE, refreshToken: true, idToken: true });
      const order = round % 2 === 0 ? [second.refresh_token!, first.refresh_token!] : [first.refresh_token!, second.refresh_token!];
      const replies = await Promise.all(order.map((token) => refresh(app, web, token)));
      for (const reply of replies) if (reply.statusCode === 200) await expectDead(reply.json() as TokenResponse);
      expect(await liveRows(userId), `round ${round}`).toEqual({ access: 0, refresh: 0 });
    }
  });

  it('checked side by side, then handed to the batch in one tick: one commits, the other is reuse, and the winner\'s rows are revoked', async () => {
    const user = await createUser(app.db);
    const { code, verifier } = await obtainCode(app, new Browser(app.oauth.app), web, user, { scope: SCOPE });
    const tokens = expectTokens(await exchangeCode(app, web, code, { code_verifier: verifier }), { scope: SCOPE, refreshToken: true, idToken: true });
    const client = (await app.oauth.clients.find(web.client.clientId))!;
    const deps = { db: app.db.kysely, tokens: app.oauth.tokens, keys: app.oauth.keys, issuer: app.config.issuer, refreshTokenTtl: app.config.tokens.refreshTokenTtl, refreshTokenMaxLifetime: app.config.tokens.refreshTokenMaxLifetime };
    const now = Date.now();
    const grants = await Promise.all([0, 1].map(() => grantRefreshToken(app.db, client, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, now, app.config.tokens.refreshTokenMaxLifetime)));
    const signed = await Promise.all(grants.map((grant) => signUserTokens(deps, grant)));
    // Same tick: on SQLite both works join one turn's transaction.
    const settled = await Promise.allSettled(grants.map((grant, i) => commitUserGrant(app.oauth.tokens, grant, signed[i]!.rows)));
    expect(settled.map((result) => result.status).sort()).toEqual(['fulfilled', 'rejected']);
    const winner = signed[settled.findIndex((result) => result.status === 'fulfilled')]!;
    const loser = settled.find((result) => result.status === 'rejected') as PromiseRejectedResult;
    expect((loser.reason as Error).message).toBe('The refresh token was already used; its family is revoked.');
    const row = await app.db.kysely.selectFrom('accessTokens').select('revokedAt').where('jti', '=', winner.rows.access.jti).executeTakeFirstOrThrow();
    expect(row.revokedAt).not.toBeNull();
    const refreshRow = await app.db.kysely.selectFrom('refreshTokens').select('revokedAt').where('tokenHash', '=', winner.rows.refresh!.tokenHash).executeTakeFirstOrThrow();
    expect(refreshRow.revokedAt).not.toBeNull();
  });
});
