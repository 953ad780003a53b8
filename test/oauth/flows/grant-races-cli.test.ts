import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, startCli, type CliDatabase } from '../../cli/cli-process.js';
import { makeConfig, type TestClient } from '../fixtures.js';
import { buildOAuthApp, SCOPES } from '../oauth-app.js';
import { Browser, type Reply } from './browser.js';
import { createUser, createWebClient, exchangeCode, expectTokenError, expectTokens, obtainCode, refresh, type FlowApp } from './flow.js';

const SCOPE = 'openid offline_access read:posts';

/** A grant's seam held until the test lets it go. */
function hold(): { seam: () => Promise<void>; arm: () => { reached: Promise<void>; release: () => void } } {
  let armed: { reached: () => void; released: Promise<void> } | null = null;
  return {
    seam: async () => {
      const next = armed;
      if (next === null) return;
      armed = null;
      next.reached();
      await next.released;
    },
    arm: () => {
      let reached!: () => void;
      let release!: () => void;
      const reachedPromise = new Promise<void>((resolve) => (reached = resolve));
      armed = { reached, released: new Promise<void>((resolve) => (release = resolve)) };
      return { reached: reachedPromise, release };
    },
  };
}

/**
 * The revocation comes from another process: `users deactivate` or `clients rotate-secret --revoke-tokens`,
 * the CLI an operator runs beside the server, against the same database (a SQLite file, or PostgreSQL).
 */
describe.each(DATABASE_KINDS)('a grant racing a revocation by another process on %s', (kind) => {
  let cli: CliDatabase;
  let app: FlowApp;
  let web: TestClient;
  const before = hold();
  const during = hold();

  beforeAll(async () => {
    cli = await openCliDatabase(kind);
    const config = makeConfig();
    const oauth = await buildOAuthApp(cli.db, config, SCOPES, { beforeGrantCommit: before.seam, duringGrantCommit: during.seam });
    app = { database: { db: cli.db, url: null, drop: () => cli.close() }, db: cli.db, config, oauth, close: async () => {} };
    web = await createWebClient(app.db);
  });
  afterAll(async () => {
    await app.oauth.app.close();
    await cli.close();
  });

  async function tokensOf(email: string): Promise<{ refresh_token?: string; access_token: string }> {
    const user = (await app.db.kysely.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirstOrThrow()) as never;
    const { code, verifier } = await obtainCode(app, new Browser(app.oauth.app), web, user, { scope: SCOPE });
    return expectTokens(await exchangeCode(app, web, code, { code_verifier: verifier }), { scope: SCOPE, refreshToken: true, idToken: true });
  }

  async function deactivate(email: string): Promise<void> {
    const result = await startCli(['users', 'deactivate', email], cli.env).result;
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
  }

  async function expectNoLiveTokens(userId: string): Promise<void> {
    const live = await app.db.kysely.selectFrom('accessTokens').select('jti').where('subject', '=', userId).where('revokedAt', 'is', null).execute();
    const families = await app.db.kysely.selectFrom('refreshTokens').select('familyId').where('userId', '=', userId).where('revokedAt', 'is', null).where('rotatedAt', 'is', null).execute();
    expect({ live, families }).toEqual({ live: [], families: [] });
  }

  it(
    'refuses a refresh whose transaction begins after the other process deactivated the user',
    async () => {
      const user = await createUser(app.db);
      const tokens = await tokensOf(user.email);
      const gate = before.arm();
      const pending = refresh(app, web, tokens.refresh_token!);
      await gate.reached;
      await deactivate(user.email);
      gate.release();
      expectTokenError(await pending, 400, 'invalid_grant', 'The refresh token was revoked.');
      await expectNoLiveTokens(user.id);
    },
    CLI_TEST_TIMEOUT,
  );

  it(
    'revokes what a refresh stored while the other process waited for the user',
    async () => {
      const user = await createUser(app.db);
      const tokens = await tokensOf(user.email);
      const gate = during.arm();
      const pending = refresh(app, web, tokens.refresh_token!);
      await gate.reached;
      const deactivation = deactivate(user.email);
      // On PostgreSQL the other process is seen waiting for the user's lock before the grant goes on; on SQLite
      // it waits for the write lock (busy_timeout), which it may reach only after the grant committed.
      if (kind === 'postgres') await lockWaitOf(app);
      gate.release();
      const [reply] = await Promise.all([pending, deactivation]);
      const issued = expectTokens(reply as Reply, { scope: SCOPE, refreshToken: true, idToken: true });
      expectTokenError(await refresh(app, web, issued.refresh_token!), 400, 'invalid_grant', 'The refresh token was revoked.');
      await expectNoLiveTokens(user.id);
    },
    CLI_TEST_TIMEOUT,
  );

  it(
    'ends a refresh racing `clients rotate-secret --revoke-tokens`, before or during its transaction',
    async () => {
      const user = await createUser(app.db);
      for (const seam of [before, during]) {
        const client = await createWebClient(app.db, { name: 'Leaked App' });
        const { code, verifier } = await obtainCode(app, new Browser(app.oauth.app), client, user, { scope: SCOPE });
        const tokens = expectTokens(await exchangeCode(app, client, code, { code_verifier: verifier }), { scope: SCOPE, refreshToken: true, idToken: true });
        const gate = seam.arm();
        const pending = refresh(app, client, tokens.refresh_token!);
        await gate.reached;
        const rotation = startCli(['clients', 'rotate-secret', client.client.clientId, '--revoke-tokens'], cli.env).result;
        if (seam === before) await rotation;
        else if (kind === 'postgres') await lockWaitOf(app);
        gate.release();
        const [reply, rotated] = await Promise.all([pending, rotation]);
        expect({ code: rotated.code, stderr: rotated.stderr }).toEqual({ code: 0, stderr: '' });
        if (seam === before) {
          expectTokenError(reply, 400, 'invalid_grant', 'The client registration changed during the request; send it again.');
        } else {
          const issued = expectTokens(reply, { scope: SCOPE, refreshToken: true, idToken: true });
          expect((await app.oauth.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${issued.access_token}` } })).statusCode).toBe(401);
        }
        const live = await app.db.kysely.selectFrom('accessTokens').select('jti').where('clientRegistrationId', '=', client.client.id).where('revokedAt', 'is', null).execute();
        const families = await app.db.kysely.selectFrom('refreshTokens').select('familyId').where('clientRegistrationId', '=', client.client.id).where('revokedAt', 'is', null).execute();
        expect({ live, families }).toEqual({ live: [], families: [] });
      }
    },
    CLI_TEST_TIMEOUT,
  );
});

/** Until some session of the test database waits for a lock (the other process, blocked by the grant's). */
async function lockWaitOf(app: FlowApp): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const waiting = await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(app.db.kysely);
    if (waiting.rows.length > 0) return;
    if (Date.now() > deadline) throw new Error('the other process never waited for the lock');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
