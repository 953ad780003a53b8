import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/audit/audit-log.js';
import { auditSigningKey, writeCheckpoint } from '../../src/audit/checkpoints.js';
import { configFrom } from '../../src/config/config.js';
import { KeyStore } from '../../src/oauth/keys/key-store.js';
import { openDb } from '../../src/storage/dialect.js';
import { migrateTo } from '../../src/storage/migrate.js';
import { sampleDecision, SILENT_LOGGER } from '../helpers/audit.js';
import { createTestDatabase, isPostgresAvailable } from '../helpers/databases.js';
import { startServer, waitUntilLive, type Running } from '../helpers/server-process.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, runCli, type CliDatabase } from './cli-process.js';

const KEY_ENCRYPTION_SECRET = 'backup-test-key-encryption-secret-0123456789';
const CLIENT_ID = 'backup-admin';
const CLIENT_SECRET = 'backup-test-admin-client-secret-0123456789abcdef';
/** What both the original server and the one on the restored copy run with. */
const SERVER_ENV = {
  // The same issuer for both, though they listen on different ports: tokens name it.
  ISSUER: 'http://portcullis.test',
  KEY_ENCRYPTION_SECRET,
  BOOTSTRAP_CLIENT_ID: CLIENT_ID,
  BOOTSTRAP_CLIENT_SECRET: CLIENT_SECRET,
  LOG_LEVEL: 'warn',
  RATE_LIMIT_MAX: '100000',
  RATE_LIMIT_ANONYMOUS_MAX: '100000',
  RATE_LIMIT_ADDRESS_MAX: '100000',
  // Checkpoints of the audit chain often, so that the copy holds some.
  AUDIT_CHECKPOINT_INTERVAL: '1',
};

const dirs: string[] = [];
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-backup-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

async function adminToken(server: Running): Promise<string> {
  const res = await fetch(`${server.base}/oauth/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'read:posts write:posts' }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { access_token: string }).access_token;
}

/**
 * Waits until audit events are in the database: they are written in batches (every 250 ms or 50 events),
 * and a fast server writes the first posts before the first batch.
 */
async function auditWritten(dataDir: string): Promise<void> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const verified = await runCli(['audit', 'verify', '--json'], { DATA_DIR: dataDir, KEY_ENCRYPTION_SECRET });
    if (verified.code === 0 && (JSON.parse(verified.stdout) as { events: number }).events > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('no audit event reached the database');
}

/** Creates posts one after another until told to stop; their ids in the order they were committed. */
function keepWriting(server: Running, token: string) {
  const ids: string[] = [];
  let stopping = false;
  const done = (async () => {
    while (!stopping) {
      const res = await fetch(`${server.base}/v1/posts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ title: `Post ${ids.length + 1}`, body: 'Written while the backup runs', status: 'published' }),
      });
      expect(res.status).toBe(201);
      ids.push(((await res.json()) as { id: string }).id);
    }
  })();
  return {
    ids,
    async until(count: number) {
      while (ids.length < count) await new Promise((resolve) => setTimeout(resolve, 10));
    },
    async stop() {
      stopping = true;
      await done;
    },
  };
}

describe('portcullis backup on sqlite', { timeout: CLI_TEST_TIMEOUT * 2 }, () => {
  it('copies the database while a server writes to it; the copy, restored into a new DATA_DIR, verifies and serves what was written', async () => {
    const original = await startServer(SERVER_ENV);
    await waitUntilLive(original);
    const token = await adminToken(original);
    const writer = keepWriting(original, token);
    await writer.until(30);
    await auditWritten(original.dataDir);

    const backups = tempDir();
    const file = path.join(backups, 'portcullis-backup.db');
    const written = writer.ids.length;
    const result = await runCli(['backup', file], { DATA_DIR: original.dataDir, KEY_ENCRYPTION_SECRET });
    const writtenAfter = writer.ids.length;
    await writer.until(writtenAfter + 10);
    await writer.stop();
    original.child.kill('SIGTERM');
    expect(await original.exited).toBe(0);

    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^backed up the database to ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(\\d+ bytes, \\d+ pages\\)\\n$`));
    const [, bytes, pages] = /\((\d+) bytes, (\d+) pages\)/.exec(result.stdout)!;
    expect(Number(bytes)).toBe(fs.statSync(file).size);
    expect(Number(bytes)).toBe(Number(pages) * 4096);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // Nothing else is left beside it (no partial copy, no journal).
    expect(fs.readdirSync(backups)).toEqual(['portcullis-backup.db']);

    // Restore: the copy becomes a new DATA_DIR's database.
    const restored = tempDir();
    fs.copyFileSync(file, path.join(restored, 'portcullis.db'));
    const verified = await runCli(['audit', 'verify', '--json'], { DATA_DIR: restored, KEY_ENCRYPTION_SECRET });
    expect(verified.stderr).toBe('');
    expect(verified.code).toBe(0);
    const report = JSON.parse(verified.stdout) as { ok: boolean; events: number; checkpoints: number };
    expect(report).toMatchObject({ ok: true });
    expect(report.events).toBeGreaterThan(0);

    // One moment's database: the posts committed before it, in order, and none after.
    const db = await openDb({ databaseUrl: null, dataDir: restored });
    let kept: string[];
    try {
      kept = (await db.kysely.selectFrom('posts' as never).select('id' as never).orderBy('id' as never).execute()).map((row) => (row as { id: string }).id);
    } finally {
      await db.close();
    }
    expect(kept.length).toBeGreaterThanOrEqual(written);
    expect(kept.length).toBeLessThanOrEqual(writtenAfter);
    expect(kept).toEqual(writer.ids.slice(0, kept.length));

    // A server on the restored copy: the same client, keys and posts.
    const second = await startServer(SERVER_ENV, restored);
    await waitUntilLive(second);
    const again = await adminToken(second);
    const last = await fetch(`${second.base}/v1/posts/${kept.at(-1)}`, { headers: { authorization: `Bearer ${again}` } });
    expect(last.status).toBe(200);
    expect(await last.json()).toMatchObject({ id: kept.at(-1), title: `Post ${kept.length}`, body: 'Written while the backup runs', status: 'published' });
    const later = await fetch(`${second.base}/v1/posts/${writer.ids[kept.length]}`, { headers: { authorization: `Bearer ${again}` } });
    expect(later.status).toBe(404);
    // The old server's token too: the signing keys came with the copy.
    expect((await fetch(`${second.base}/v1/posts?limit=1`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  });

  describe('refusals', () => {
    let t: CliDatabase;
    afterEach(async () => {
      await t.close();
    });

    it('refuses to replace an existing file unless --force is given; with it, the file is replaced by a copy of mode 0600', async () => {
      t = await openCliDatabase('sqlite');
      const dir = tempDir();
      const file = path.join(dir, 'existing.db');
      fs.writeFileSync(file, 'keep me', { mode: 0o644 });
      expect(await runCli(['backup', file], t.env)).toEqual({
        code: 2,
        stdout: '',
        stderr: `error: ${file} exists; pass --force to replace it\nRun 'portcullis backup --help' for usage.\n`,
      });
      expect(fs.readFileSync(file, 'utf8')).toBe('keep me');
      expect(fs.readdirSync(dir)).toEqual(['existing.db']);

      const forced = await runCli(['backup', file, '--force', '--json'], t.env);
      expect(forced).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(forced.stdout)).toEqual({ file, pages: expect.any(Number), bytes: fs.statSync(file).size });
      expect(fs.readFileSync(file).subarray(0, 16).toString('latin1')).toBe('SQLite format 3\0');
      expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    });

    it('refuses the database itself, and a directory that does not exist', async () => {
      t = await openCliDatabase('sqlite');
      const live = path.join(t.env.DATA_DIR!, 'portcullis.db');
      const before = fs.readFileSync(live);
      for (const target of [live, `${live}-wal`]) {
        expect(await runCli(['backup', target, '--force'], t.env)).toEqual({
          code: 2,
          stdout: '',
          stderr: `error: ${target} is the database itself (or one of its files); back it up into another file\nRun 'portcullis backup --help' for usage.\n`,
        });
      }
      expect(fs.readFileSync(live)).toEqual(before);
      const missing = path.join(tempDir(), 'no', 'such');
      expect(await runCli(['backup', path.join(missing, 'copy.db')], t.env)).toEqual({ code: 1, stdout: '', stderr: `error: the directory ${missing} does not exist\n` });
    });
  });

  it('copies the database as it is: a database an older version left is not migrated first', async () => {
    const dataDir = tempDir();
    const db = await openDb({ databaseUrl: null, dataDir });
    await migrateTo(db, '013-audit-trace-id');
    await db.close();
    const file = path.join(tempDir(), 'copy.db');
    expect((await runCli(['backup', file], { DATA_DIR: dataDir })).code).toBe(0);
    for (const sqliteFile of [path.join(dataDir, 'portcullis.db'), file]) {
      const copy = await openDb({ databaseUrl: null, dataDir, sqliteFile });
      try {
        const applied = await copy.kysely.selectFrom('kysely_migration' as never).select('name' as never).orderBy('name' as never).execute();
        expect(applied.at(-1)).toEqual({ name: '013-audit-trace-id' });
      } finally {
        await copy.close();
      }
    }
  });
});

const postgres = await isPostgresAvailable();
const pgTools = spawnSync('pg_dump', ['--version']).status === 0 && spawnSync('pg_restore', ['--version']).status === 0;

describe.runIf(postgres)('backups on postgres', { timeout: CLI_TEST_TIMEOUT }, () => {
  it('backup refuses, pointing to pg_dump', async () => {
    const t = await openCliDatabase('postgres');
    try {
      const file = path.join(tempDir(), 'copy.db');
      expect(await runCli(['backup', file], t.env)).toEqual({
        code: 1,
        stdout: '',
        stderr:
          'error: backup copies the embedded SQLite database, and DATABASE_URL names a PostgreSQL one: back it up with pg_dump --format=custom and restore it with pg_restore (README, "Backups and restore")\n',
      });
      expect(fs.existsSync(file)).toBe(false);
    } finally {
      await t.close();
    }
  });

  it.runIf(pgTools)('pg_dump --format=custom and pg_restore into a new database, as the README says: the audit chain verifies and the keys sign', async () => {
    const source = await createTestDatabase('postgres');
    const target = await createTestDatabase('postgres', { migrate: false });
    try {
      const config = configFrom({ KEY_ENCRYPTION_SECRET });
      const signing = (await (await KeyStore.open(source.db, config)).signingKey()).kid;
      const audit = new AuditLog(source.db, SILENT_LOGGER, { maxBatch: 50, flushMs: 5 });
      for (let i = 0; i < 5; i++) audit.record(sampleDecision(i));
      await audit.close();
      const key = await auditSigningKey(source.db.kysely, KEY_ENCRYPTION_SECRET);
      await writeCheckpoint(source.db.kysely, key);

      // The target database exists and is empty (createdb); the README's commands, with the URLs as arguments
      // (these have no password: a real one belongs in PGPASSWORD or ~/.pgpass, not on a command line).
      const file = path.join(tempDir(), 'portcullis.dump');
      const dump = spawnSync('pg_dump', ['--format=custom', `--file=${file}`, source.url!], { encoding: 'utf8' });
      expect(dump.stderr).toBe('');
      expect(dump.status).toBe(0);
      const restore = spawnSync('pg_restore', ['--no-owner', `--dbname=${target.url!}`, file], { encoding: 'utf8' });
      expect(restore.stderr).toBe('');
      expect(restore.status).toBe(0);

      const env = { DATABASE_URL: target.url!, KEY_ENCRYPTION_SECRET };
      const verified = await runCli(['audit', 'verify', `--key-fingerprint=${key.fingerprint}`, '--json'], env);
      expect(verified).toMatchObject({ code: 0, stderr: '' });
      expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, events: 5, checkpoints: 1, uncovered: 0, keyFingerprints: [key.fingerprint] });
      expect((await (await KeyStore.open(target.db, config)).signingKey()).kid).toBe(signing);
      // The restored tables are append-only as before.
      await expect(target.db.kysely.deleteFrom('auditEvents').execute()).rejects.toThrow(/archived/);
    } finally {
      await source.drop();
      await target.drop();
    }
  });
});
