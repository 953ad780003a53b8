import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { openDb, type Db } from '../../src/storage/dialect.js';
import { migrateToLatest } from '../../src/storage/migrate.js';

/**
 * The suites run on SQLite always and on PostgreSQL when it answers. With PORTCULLIS_TEST_POSTGRES=require
 * (set by .ci/run) an unreachable PostgreSQL fails the run instead of being skipped.
 */
export const POSTGRES_ADMIN_URL = process.env.PORTCULLIS_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const POSTGRES_REQUIRED = process.env.PORTCULLIS_TEST_POSTGRES === 'require';

let postgresAvailable: Promise<boolean> | undefined;

export function isPostgresAvailable(): Promise<boolean> {
  postgresAvailable ??= (async () => {
    const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 2000 });
    try {
      await client.connect();
      await client.query('select 1');
      return true;
    } catch (error) {
      if (POSTGRES_REQUIRED) throw new Error(`PostgreSQL is required but not reachable at ${POSTGRES_ADMIN_URL}: ${String(error)}`);
      console.warn(`[portcullis tests] PostgreSQL not reachable at ${POSTGRES_ADMIN_URL}: skipping the PostgreSQL suite`);
      return false;
    } finally {
      await client.end().catch(() => {});
    }
  })();
  return postgresAvailable;
}

export interface TestDatabase {
  db: Db;
  /** URL for a second connection (PostgreSQL) or null (SQLite in memory). */
  url: string | null;
  drop(): Promise<void>;
}

/** A fresh database per call, migrated unless told not to: an in-memory SQLite or a new PostgreSQL database. */
export async function createTestDatabase(kind: 'sqlite' | 'postgres', options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const migrate = options.migrate ?? true;
  if (kind === 'sqlite') {
    const db = await openDb({ databaseUrl: null, dataDir: '', sqliteFile: ':memory:' });
    if (migrate) await migrateToLatest(db);
    return { db, url: null, drop: () => db.close() };
  }
  const name = `portcullis_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  const db = await openDb({ databaseUrl: url.toString(), dataDir: '' });
  if (migrate) await migrateToLatest(db);
  return {
    db,
    url: url.toString(),
    drop: async () => {
      await db.close();
      const c = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

/** The database kinds a suite should run on in this environment. */
export const DATABASE_KINDS: ('sqlite' | 'postgres')[] = (await isPostgresAvailable()) ? ['sqlite', 'postgres'] : ['sqlite'];
