import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/oauth/passwords.js';
import { nowIso } from '../../src/storage/ids.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, runCli, type CliDatabase } from './cli-process.js';

describe.each(DATABASE_KINDS)('portcullis users on %s', { timeout: CLI_TEST_TIMEOUT }, (kind) => {
  let t: CliDatabase;
  beforeEach(async () => {
    t = await openCliDatabase(kind);
  });
  afterEach(async () => {
    await t.close();
  });

  async function userRow(email: string) {
    return t.db.kysely.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirstOrThrow();
  }

  it('create without --password generates one, prints it once and stores only its hash', async () => {
    const result = await runCli(['users', 'create', '--email', 'ada@example.com', '--name', 'Ada', '--role', 'editor'], t.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const row = await userRow('ada@example.com');
    const password = /^password: (\S+)$/m.exec(result.stdout)?.[1];
    expect(password).toBeDefined();
    expect(password!.length).toBeGreaterThanOrEqual(24);
    expect(result.stdout).toBe(`created user ${row.id} <ada@example.com> (editor)\npassword: ${password}\n(shown once: only its hash is stored)\n`);
    expect(row).toMatchObject({ name: 'Ada', role: 'editor' });
    expect(Boolean(row.active)).toBe(true);
    expect(row.passwordHash).not.toContain(password!);
    expect(await verifyPassword(password!, row.passwordHash)).toBe(true);
  });

  it('create with --password --json prints the user and no password', async () => {
    const result = await runCli(
      ['users', 'create', '--email', 'bo@example.com', '--name', 'Bo', '--role', 'member', '--password', 'correct horse battery', '--json'],
      t.env,
    );
    expect(result.code).toBe(0);
    const row = await userRow('bo@example.com');
    expect(JSON.parse(result.stdout)).toEqual({
      user: { id: row.id, email: 'bo@example.com', name: 'Bo', role: 'member', active: true, createdAt: row.createdAt, updatedAt: row.updatedAt },
    });
    expect(result.stdout).not.toContain('correct horse');
    expect(await verifyPassword('correct horse battery', row.passwordHash)).toBe(true);
  });

  it('refuses a duplicate email (exit 1) and values the contract refuses (exit 2), writing nothing', async () => {
    const args = ['users', 'create', '--email', 'cy@example.com', '--name', 'Cy', '--role', 'member'];
    expect((await runCli(args, t.env)).code).toBe(0);
    expect(await runCli(args, t.env)).toEqual({ code: 1, stdout: '', stderr: 'error: a user with email cy@example.com already exists\n' });

    const short = await runCli(['users', 'create', '--email', 'dee@example.com', '--name', 'Dee', '--role', 'member', '--password', 'elevenchars'], t.env);
    expect(short).toEqual({
      code: 2,
      stdout: '',
      stderr: "error: --password: must NOT have fewer than 12 characters\nRun 'portcullis users create --help' for usage.\n",
    });
    const badRole = await runCli(['users', 'create', '--email', 'dee@example.com', '--name', 'Dee', '--role', 'root'], t.env);
    expect(badRole.code).toBe(2);
    expect(badRole.stderr).toContain('--role: must be one of admin, editor, member');
    const badEmail = await runCli(['users', 'create', '--email', 'not-an-email', '--name', 'Dee', '--role', 'member'], t.env);
    expect(badEmail.code).toBe(2);
    expect(badEmail.stderr).toContain('--email: must match format "email"');
    expect(await t.db.kysely.selectFrom('users').select('email').execute()).toEqual([{ email: 'cy@example.com' }]);
  });

  it('list filters by role and active, limits, and prints JSON or a table', async () => {
    for (const [email, role] of [['a@example.com', 'admin'], ['e@example.com', 'editor'], ['m@example.com', 'member']] as const) {
      expect((await runCli(['users', 'create', '--email', email, '--name', email, '--role', role, '--password', 'a long enough password'], t.env)).code).toBe(0);
    }
    await t.db.kysely.updateTable('users').set({ active: false }).where('email', '=', 'm@example.com').execute();

    const all = await runCli(['users', 'list', '--json'], t.env);
    expect(all.code).toBe(0);
    expect(JSON.parse(all.stdout).map((u: { email: string }) => u.email)).toEqual(['a@example.com', 'e@example.com', 'm@example.com']);

    const inactive = JSON.parse((await runCli(['users', 'list', '--active', 'false', '--json'], t.env)).stdout);
    expect(inactive).toMatchObject([{ email: 'm@example.com', active: false }]);
    expect(inactive[0]).not.toHaveProperty('passwordHash');
    const editors = JSON.parse((await runCli(['users', 'list', '--role', 'editor', '--json'], t.env)).stdout);
    expect(editors.map((u: { email: string }) => u.email)).toEqual(['e@example.com']);
    const first = JSON.parse((await runCli(['users', 'list', '--limit', '1', '--json'], t.env)).stdout);
    expect(first.map((u: { email: string }) => u.email)).toEqual(['a@example.com']);

    const table = await runCli(['users', 'list', '--role', 'admin'], t.env);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^id\s+email\s+name\s+role\s+active\s+created$/);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/a@example\.com\s+a@example\.com\s+admin\s+true\s/);

    const bad = await runCli(['users', 'list', '--active', 'maybe'], t.env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--active: must be boolean');
  });

  it("deactivate (by email or id) sets active=false and revokes only that user's access tokens", async () => {
    for (const email of ['gone@example.com', 'stays@example.com']) {
      expect((await runCli(['users', 'create', '--email', email, '--name', 'X', '--role', 'member', '--password', 'a long enough password'], t.env)).code).toBe(0);
    }
    const gone = await userRow('gone@example.com');
    const stays = await userRow('stays@example.com');
    const issuedAt = nowIso();
    const expiresAt = new Date(Date.now() + 600_000).toISOString();
    const token = (jti: string, subject: string) => ({
      jti, tokenHash: null, format: 'jwt', clientId: 'app', subject, subjectType: 'user', scopes: 'read:posts', grantType: 'authorization_code', issuedAt, expiresAt, revokedAt: null,
    });
    await t.db.kysely.insertInto('accessTokens').values([token('t1', gone.id), token('t2', gone.id), token('t3', stays.id)]).execute();

    const result = await runCli(['users', 'deactivate', 'gone@example.com'], t.env);
    expect(result).toEqual({ code: 0, stdout: `deactivated user ${gone.id} <gone@example.com>; revoked 2 access tokens\n`, stderr: '' });
    expect(Boolean((await userRow('gone@example.com')).active)).toBe(false);
    expect(Boolean((await userRow('stays@example.com')).active)).toBe(true);
    const tokens = await t.db.kysely.selectFrom('accessTokens').select(['jti', 'revokedAt']).orderBy('jti').execute();
    expect(tokens[0]!.revokedAt).not.toBeNull();
    expect(tokens[1]!.revokedAt).toBe(tokens[0]!.revokedAt);
    expect(tokens[2]!.revokedAt).toBeNull();

    const again = await runCli(['users', 'deactivate', gone.id, '--json'], t.env);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ user: { id: gone.id, active: false }, revokedTokens: 0 });

    expect(await runCli(['users', 'deactivate', 'nobody@example.com'], t.env)).toEqual({ code: 1, stdout: '', stderr: 'error: no user nobody@example.com\n' });
  });

  it('deactivate leaves a new version, never the one a concurrent PUT read, even within the same millisecond', async () => {
    expect((await runCli(['users', 'create', '--email', 'versioned@example.com', '--name', 'V', '--role', 'member', '--password', 'a long enough password'], t.env)).code).toBe(0);
    const user = await userRow('versioned@example.com');
    // A version later than the clock: a write in the same millisecond as it is what must still move it.
    const read = new Date(Date.now() + 60_000).toISOString();
    await t.db.kysely.updateTable('users').set({ updatedAt: read }).where('id', '=', user.id).execute();
    const result = await runCli(['users', 'deactivate', user.id, '--json'], t.env);
    const next = new Date(Date.parse(read) + 1).toISOString();
    expect(JSON.parse(result.stdout)).toMatchObject({ user: { id: user.id, active: false, updatedAt: next } });
    expect(await userRow('versioned@example.com')).toMatchObject({ updatedAt: next });
    // A PUT that read the version before the deactivation finds the user changed: it cannot switch it back on.
    const put = await t.db.kysely.updateTable('users').set({ active: true }).where('id', '=', user.id).where('updatedAt', '=', read).executeTakeFirst();
    expect(Number(put.numUpdatedRows)).toBe(0);
  });
});
