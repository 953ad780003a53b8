import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestDatabase, DATABASE_KINDS, POSTGRES_ADMIN_URL, type TestDatabase } from '../helpers/databases.js';

// A PostgreSQL connection can be cut at any time (an administrator, a failover, a restart). The pool's
// idle connections and the ones a transaction holds between statements both emit `error` then; without a
// listener that is an uncaught exception, which ends a production process.

const describePostgres = DATABASE_KINDS.includes('postgres') ? describe : describe.skip;

describePostgres('PostgreSQL connections cut by the server', () => {
  let t: TestDatabase | null = null;
  const uncaught: unknown[] = [];
  const record = (error: unknown) => uncaught.push(error);

  afterEach(async () => {
    process.off('uncaughtException', record);
    await t?.drop();
    t = null;
  });

  async function terminateBackends(database: TestDatabase): Promise<number> {
    const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
    await admin.connect();
    try {
      const name = new URL(database.url!).pathname.slice(1);
      const result = await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [name]);
      return result.rowCount ?? 0;
    } finally {
      await admin.end();
    }
  }

  it('fail the statement that needed them, never the process, and the pool connects again', async () => {
    process.on('uncaughtException', record);
    t = await createTestDatabase('postgres');
    const db = t.db.kysely;
    // Connections of both kinds: idle in the pool, and held by a transaction between two statements.
    await Promise.all([sql`select pg_sleep(0.05)`.execute(db), sql`select pg_sleep(0.05)`.execute(db)]);
    let cut!: () => void;
    const wasCut = new Promise<void>((resolve) => (cut = resolve));
    const transaction = db.transaction().execute(async (trx) => {
      await sql`select 1`.execute(trx);
      cut();
      await new Promise((resolve) => setTimeout(resolve, 500));
      await sql`select 2`.execute(trx);
    });
    await wasCut;
    expect(await terminateBackends(t)).toBeGreaterThanOrEqual(2);
    await expect(transaction).rejects.toThrow();
    // The pool replaces the connections it lost.
    expect((await sql<{ n: number }>`select 1 as n`.execute(db)).rows).toEqual([{ n: 1 }]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(uncaught).toEqual([]);
  });
});
