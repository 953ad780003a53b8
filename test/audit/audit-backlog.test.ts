import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/audit/audit-log.js';
import { verifyAuditChain } from '../../src/audit/verify-chain.js';
import type { Db } from '../../src/storage/dialect.js';
import { allowAuditWrites, refuseAuditWrites, sampleDecision } from '../helpers/audit.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

// The audit log while the database refuses its writes: nothing recorded is dropped, the queue reports
// itself full at its bound (the server then refuses requests), and once writes succeed again every event
// is stored once, in the order it was recorded, on one intact chain.

const intact = (events: number) => ({ ok: true, events, checkpoints: 0, uncovered: events, keyFingerprints: [], archived: null });

function capturingLogger() {
  const errors: { obj: Record<string, unknown>; msg: string }[] = [];
  return { errors, logger: { info: () => {}, error: (obj: object, msg: string) => errors.push({ obj: obj as Record<string, unknown>, msg }) } };
}

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each(DATABASE_KINDS)('audit log while writes fail, on %s', (kind) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(kind);
  });
  afterEach(async () => {
    await t.drop();
  });

  const storedRequestIds = async () => (await t.db.kysely.selectFrom('auditEvents').select('requestId').orderBy('seq').execute()).map((row) => row.requestId);

  it('keeps every event past its bound, reports itself full, and writes them all in order once it can', async () => {
    const { errors, logger } = capturingLogger();
    const log = new AuditLog(t.db, logger, { maxBatch: 5, flushMs: 5, retryMs: 20, maxPending: 12 });
    log.record(sampleDecision(0));
    await log.flush();
    await refuseAuditWrites(t.db.kysely, kind);

    for (let i = 1; i <= 11; i++) log.record(sampleDecision(i));
    await log.flush();
    expect({ pending: log.pendingCount, full: log.full }).toEqual({ pending: 11, full: false });
    expect(errors.map((e) => e.msg)).toContain('audit.write_failed');
    log.record(sampleDecision(12));
    expect({ pending: log.pendingCount, full: log.full }).toEqual({ pending: 12, full: true });
    // The requests already admitted still record theirs: past the bound nothing is dropped.
    for (let i = 13; i < 20; i++) log.record(sampleDecision(i));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect({ pending: log.pendingCount, full: log.full }).toEqual({ pending: 19, full: true });
    expect(await storedRequestIds()).toEqual(['req-0']);

    await allowAuditWrites(t.db.kysely, kind);
    // The retry timer writes them; nobody has to call flush.
    await until(() => log.pendingCount === 0);
    expect(log.full).toBe(false);
    expect(await storedRequestIds()).toEqual(Array.from({ length: 20 }, (_, i) => `req-${i}`));
    expect(await verifyAuditChain(t.db.kysely)).toEqual(intact(20));
    await log.close();
  });

  it('keeps the order when events arrive while a failing write is still running', async () => {
    const log = new AuditLog(t.db, capturingLogger().logger, { maxBatch: 3, flushMs: 1, retryMs: 10 });
    await refuseAuditWrites(t.db.kysely, kind);
    // Each batch of three starts a write at once; the next batches come in while it fails.
    for (let i = 0; i < 30; i++) {
      log.record(sampleDecision(i));
      if (i % 4 === 0) await Promise.resolve();
    }
    await new Promise((resolve) => setTimeout(resolve, 30));
    await allowAuditWrites(t.db.kysely, kind);
    for (let i = 30; i < 40; i++) log.record(sampleDecision(i));
    await log.close();
    expect(await storedRequestIds()).toEqual(Array.from({ length: 40 }, (_, i) => `req-${i}`));
    expect(await verifyAuditChain(t.db.kysely)).toEqual(intact(40));
  });

  it('gives up on close after closeTimeoutMs while writes fail, naming how many events it leaves', async () => {
    const { errors, logger } = capturingLogger();
    const log = new AuditLog(t.db, logger, { flushMs: 5, retryMs: 20, closeTimeoutMs: 150 });
    await refuseAuditWrites(t.db.kysely, kind);
    for (let i = 0; i < 3; i++) log.record(sampleDecision(i));
    const started = Date.now();
    await log.close();
    expect(Date.now() - started).toBeLessThan(2000);
    expect(errors.filter((e) => e.msg === 'audit.write_failed').length).toBeGreaterThan(1);
    expect(errors.filter((e) => e.msg === 'audit.unwritten').map((e) => e.obj)).toEqual([{ count: 3 }]);
    await allowAuditWrites(t.db.kysely, kind);
    expect(await storedRequestIds()).toEqual([]);
  });
});

describe('audit log after a write whose commit was never confirmed', () => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase('sqlite');
  });
  afterEach(async () => {
    await t.drop();
  });

  it('stores those events once: the next write leaves out what is already in the table', async () => {
    const handle = t.db.sqlite!;
    let lose = 1;
    // The transaction commits, then its caller hears of a failure: a connection lost before the COMMIT's answer.
    const flaky: Db = {
      ...t.db,
      sqlite: {
        prepare: handle.prepare,
        backup: handle.backup,
        get inTransaction() {
          return handle.inTransaction;
        },
        beginImmediate: handle.beginImmediate,
        async immediateTransaction(run) {
          const result = await handle.immediateTransaction(run);
          if (lose-- > 0) throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
          return result;
        },
      },
    };
    const log = new AuditLog(flaky, capturingLogger().logger, { flushMs: 5, retryMs: 10 });
    for (let i = 0; i < 3; i++) log.record(sampleDecision(i));
    await log.flush();
    expect(log.pendingCount).toBe(3);
    for (let i = 3; i < 5; i++) log.record(sampleDecision(i));
    await log.close();
    const rows = await t.db.kysely.selectFrom('auditEvents').select('requestId').orderBy('seq').execute();
    expect(rows.map((row) => row.requestId)).toEqual(['req-0', 'req-1', 'req-2', 'req-3', 'req-4']);
    expect(await verifyAuditChain(t.db.kysely)).toEqual(intact(5));
  });
});
