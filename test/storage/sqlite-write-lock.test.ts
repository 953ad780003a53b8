import Database from 'better-sqlite3';
import { sql } from 'kysely';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/audit/audit-log.js';
import { verifyAuditChain } from '../../src/audit/verify-chain.js';
import { openDb, sqliteFileIn, type Db } from '../../src/storage/dialect.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { BatchCommitError, TurnBatch } from '../../src/storage/turn-batch.js';
import { writeTransaction } from '../../src/storage/write-transaction.js';
import { sampleDecision } from '../helpers/audit.js';

// Several workers share one SQLite file (WORKERS=N). A write that meets another process's write lock waits
// for it — and the event loop of the waiting process goes on serving requests meanwhile: SQLite's own busy
// handler would sleep the thread, and with it every request the worker holds.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How many times a 5 ms interval fired while `promise` ran, and whether it had settled after `holdMs`. */
async function whileHeld<T>(promise: Promise<T>, holdMs: number, release: () => void): Promise<{ ticks: number; settledWhileHeld: boolean; result: T }> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  let ticks = 0;
  const interval = setInterval(() => ticks++, 5);
  try {
    await sleep(holdMs);
    const settledWhileHeld = settled;
    const ticksWhileHeld = ticks;
    release();
    return { ticks: ticksWhileHeld, settledWhileHeld, result: await promise };
  } finally {
    clearInterval(interval);
  }
}

describe('SQLite: a write waiting for another connection’s write lock', () => {
  let dir: string;
  let db: Db;
  /** Another process's connection to the same file. */
  let other: Database.Database;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-write-lock-'));
    db = await openDb({ databaseUrl: null, dataDir: dir });
    await migrateToLatest(db);
    await db.kysely.schema.createTable('scratch').addColumn('id', 'text', (column) => column.primaryKey()).execute();
    other = new Database(sqliteFileIn(dir));
    other.pragma('busy_timeout = 0');
  });
  afterEach(async () => {
    if (other.inTransaction) other.prepare('rollback').run();
    other.close();
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const scratchIds = () => other.prepare('select id from scratch order by id').pluck().all();
  const holdLock = () => other.prepare('begin immediate').run();
  const releaseLock = () => other.prepare('commit').run();

  it('outside a transaction: waits with the event loop free, then writes once the lock is released', async () => {
    holdLock();
    const held = await whileHeld(sql`insert into scratch (id) values (${'a'})`.execute(db.kysely), 80, releaseLock);
    expect(held.settledWhileHeld).toBe(false);
    expect(held.ticks).toBeGreaterThanOrEqual(5);
    expect(scratchIds()).toEqual(['a']);
    expect(db.sqlite!.inTransaction).toBe(false);
  });

  it('a Kysely transaction and writeTransaction: the same', async () => {
    holdLock();
    const viaKysely = db.kysely.transaction().execute(async (trx) => {
      await sql`insert into scratch (id) values (${'b'})`.execute(trx);
      return 'committed';
    });
    const held = await whileHeld(viaKysely, 80, releaseLock);
    expect(held).toMatchObject({ settledWhileHeld: false, result: 'committed' });
    expect(held.ticks).toBeGreaterThanOrEqual(5);

    holdLock();
    const viaWriteTransaction = writeTransaction(db.kysely, async (trx) => {
      await sql`insert into scratch (id) values (${'c'})`.execute(trx);
      return 'committed';
    });
    const again = await whileHeld(viaWriteTransaction, 80, releaseLock);
    expect(again).toMatchObject({ settledWhileHeld: false, result: 'committed' });
    expect(again.ticks).toBeGreaterThanOrEqual(5);
    expect(scratchIds()).toEqual(['b', 'c']);
  });

  it('the audit chain’s appends: the same, and the chain stays intact', async () => {
    const log = new AuditLog(db, { info: () => {}, error: () => {} }, { flushMs: 1000 });
    for (let i = 0; i < 3; i++) log.record(sampleDecision(i));
    holdLock();
    const held = await whileHeld(log.flush(), 80, releaseLock);
    expect(held.settledWhileHeld).toBe(false);
    expect(held.ticks).toBeGreaterThanOrEqual(5);
    expect(log.pendingCount).toBe(0);
    expect(await verifyAuditChain(db.kysely)).toEqual({ ok: true, events: 3, checkpoints: 0, uncovered: 3, keyFingerprints: [], archived: null });
    await log.close();
  });

  it('the token endpoint’s turn batch: the same', async () => {
    holdLock();
    const held = await whileHeld(new TurnBatch(db).transact(async () => 'committed'), 80, releaseLock);
    expect(held).toMatchObject({ settledWhileHeld: false, result: 'committed' });
    expect(held.ticks).toBeGreaterThanOrEqual(5);
    expect(db.sqlite!.inTransaction).toBe(false);
  });

  it('readers keep their wait: busy_timeout is back after a lock taken, one given up on, and a BEGIN that failed otherwise', async () => {
    const busyTimeout = (database: Db) => database.kysely.executeQuery<{ timeout: number }>(sql`pragma busy_timeout`.compile(database.kysely));
    const impatient = await openDb({ databaseUrl: null, dataDir: dir, writeLockTimeoutMs: 30 });
    try {
      await impatient.sqlite!.beginImmediate();
      expect((await busyTimeout(impatient)).rows).toEqual([{ timeout: 5000 }]);
      // A BEGIN inside a transaction fails with another error than SQLITE_BUSY.
      expect(() => impatient.sqlite!.beginImmediate()).toThrow(/within a transaction/);
      expect((await busyTimeout(impatient)).rows).toEqual([{ timeout: 5000 }]);
      impatient.sqlite!.prepare('commit').run();
      holdLock();
      await expect(impatient.sqlite!.beginImmediate()).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
      expect((await busyTimeout(impatient)).rows).toEqual([{ timeout: 5000 }]);
    } finally {
      await impatient.close();
    }
  });

  it('a transaction begins IMMEDIATE: once open, even before its first write, no other connection can take the lock', async () => {
    const refused = await db.kysely.transaction().execute(async (trx) => {
      await sql`select count(*) from scratch`.execute(trx);
      try {
        holdLock();
        return null;
      } catch (error) {
        return (error as { code?: string }).code;
      }
    });
    expect(refused).toBe('SQLITE_BUSY');
    // Once it has committed, the lock is free again.
    holdLock();
    releaseLock();
  });

  it('a write that fails inside its own transaction leaves none open, and the next write goes through', async () => {
    await sql`insert into scratch (id) values (${'d'})`.execute(db.kysely);
    await expect(sql`insert into scratch (id) values (${'d'})`.execute(db.kysely)).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(db.sqlite!.inTransaction).toBe(false);
    await sql`insert into scratch (id) values (${'e'})`.execute(db.kysely);
    expect(scratchIds()).toEqual(['d', 'e']);
  });

  it('gives up with SQLITE_BUSY once the wait bound has passed, the event loop free until then, and nothing left open', async () => {
    const impatient = await openDb({ databaseUrl: null, dataDir: dir, writeLockTimeoutMs: 150 });
    try {
      holdLock();
      const started = Date.now();
      let ticks = 0;
      const interval = setInterval(() => ticks++, 5);
      const error = await sql`insert into scratch (id) values (${'f'})`.execute(impatient.kysely).then(
        () => null,
        (failure: unknown) => failure,
      );
      clearInterval(interval);
      expect(error).toMatchObject({ code: 'SQLITE_BUSY' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(150);
      expect(ticks).toBeGreaterThanOrEqual(10);
      expect(impatient.sqlite!.inTransaction).toBe(false);
      // The token endpoint's turn batch fails as a whole, answered 503 by the endpoints.
      const batchError = await new TurnBatch(impatient).transact(async () => 'committed').then(
        () => null,
        (failure: unknown) => failure,
      );
      expect(batchError).toBeInstanceOf(BatchCommitError);
      expect((batchError as BatchCommitError).cause).toMatchObject({ code: 'SQLITE_BUSY' });
      expect(impatient.sqlite!.inTransaction).toBe(false);
      releaseLock();
      await sql`insert into scratch (id) values (${'g'})`.execute(impatient.kysely);
      expect(scratchIds()).toEqual(['g']);
    } finally {
      await impatient.close();
    }
  });
});
