import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { configFrom } from '../../src/config/config.js';
import { createTestDatabase, DATABASE_KINDS, POSTGRES_ADMIN_URL, type TestDatabase } from '../helpers/databases.js';

// Every process opens at most DATABASE_POOL_SIZE connections, named `portcullis` in pg_stat_activity: the
// number an operator multiplies by workers and instances to stay under max_connections.

const describePostgres = DATABASE_KINDS.includes('postgres') ? describe : describe.skip;

describePostgres('the PostgreSQL connection pool', () => {
  let database: TestDatabase | null = null;
  let app: App | null = null;
  let dataDir: string | null = null;

  afterEach(async () => {
    await app?.close();
    await database?.drop();
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    app = null;
    database = null;
    dataDir = null;
  });

  /** The connections to the database by application name, as PostgreSQL sees them now. */
  async function connectionsTo(url: string): Promise<Record<string, number>> {
    const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
    await admin.connect();
    try {
      const name = new URL(url).pathname.slice(1);
      const { rows } = await admin.query<{ application_name: string; count: string }>(
        'select application_name, count(*) from pg_stat_activity where datname = $1 group by application_name',
        [name],
      );
      return Object.fromEntries(rows.map((row) => [row.application_name, Number(row.count)]));
    } finally {
      await admin.end();
    }
  }

  /** The server on a new database, its DATABASE_URL the database's URL as `configure` changes it. */
  async function startWith(env: Record<string, string>, configure: (url: URL) => void = () => {}): Promise<{ app: App; url: string }> {
    // Not migrated, the helper's own pool never connects: every connection seen is the server's.
    database = await createTestDatabase('postgres', { migrate: false });
    const url = database.url!;
    const configured = new URL(url);
    configure(configured);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-pool-'));
    app = await buildApp(configFrom({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', DATABASE_URL: configured.toString(), ...env }));
    return { app, url };
  }

  /** Starts `count` statements that each hold a connection for a moment, and counts connections meanwhile. */
  async function underLoad(app: App, url: string, count: number): Promise<Record<string, number>> {
    const sleeping = Array.from({ length: count }, () => sql`select pg_sleep(0.4)`.execute(app.db.kysely));
    await new Promise((resolve) => setTimeout(resolve, 200));
    const seen = await connectionsTo(url);
    await Promise.all(sleeping);
    return seen;
  }

  it('opens at most DATABASE_POOL_SIZE connections, however many statements wait, and names them', async () => {
    const { app, url } = await startWith({ DATABASE_POOL_SIZE: '2' });
    expect(await underLoad(app, url, 6)).toEqual({ portcullis: 2 });
    // The statements beyond the pool's size waited for a connection and ran.
    const { rows } = await sql<{ n: number }>`select 1 as n`.execute(app.db.kysely);
    expect(rows).toEqual([{ n: 1 }]);
  });

  it('opens up to 10 connections when DATABASE_POOL_SIZE is not set', async () => {
    const { app, url } = await startWith({});
    expect(await underLoad(app, url, 14)).toEqual({ portcullis: 10 });
  });

  it('keeps an application_name the URL gives', async () => {
    const { app, url } = await startWith({ DATABASE_POOL_SIZE: '3' }, (named) => named.searchParams.set('application_name', 'api-eu-1'));
    expect(await underLoad(app, url, 3)).toEqual({ 'api-eu-1': 3 });
  });
});
