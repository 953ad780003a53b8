import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SQLITE_SLICE } from '../../src/audit/append-events.js';
import { AuditLog } from '../../src/audit/audit-log.js';
import { verifyAuditChain } from '../../src/audit/verify-chain.js';
import { sampleDecision } from '../helpers/audit.js';
import { createTestDatabase, type TestDatabase } from '../helpers/databases.js';

// On SQLite the audit append runs on the event loop, so a batch is written in slices of SQLITE_SLICE events,
// one transaction each, with requests served in between; a slice that fails leaves the ones before it
// stored, and the next attempt writes the rest once, on one chain.

const quietLogger = { info: () => {}, error: () => {} };
const intact = (events: number) => ({ ok: true, events, checkpoints: 0, uncovered: events, keyFingerprints: [], archived: null });

describe('the SQLite audit append, in slices', () => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase('sqlite');
  });
  afterEach(async () => {
    await t.drop();
  });

  const storedRequestIds = async () => (await t.db.kysely.selectFrom('auditEvents').select('requestId').orderBy('seq').execute()).map((row) => row.requestId);
  const count = 2 * SQLITE_SLICE + 20;

  it('lets the event loop run between slices and makes one chain of the batch', async () => {
    const log = new AuditLog(t.db, quietLogger, { maxBatch: 10_000, flushMs: 60_000 });
    for (let i = 0; i < count; i++) log.record(sampleDecision(i));
    let done = false;
    const written = log.flush().then(() => void (done = true));
    // Meanwhile, the event loop's later turns see the rows arrive slice by slice.
    const seen: number[] = [];
    while (!done) {
      seen.push((await storedRequestIds()).length);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await written;
    expect(seen.filter((n) => n > 0 && n < count).every((n) => n % SQLITE_SLICE === 0)).toBe(true);
    expect(seen.some((n) => n > 0 && n < count)).toBe(true);
    expect(await storedRequestIds()).toEqual(Array.from({ length: count }, (_, i) => `req-${i}`));
    expect(await verifyAuditChain(t.db.kysely)).toEqual(intact(count));
    await log.close();
  });

  it('keeps the slices written before one that failed, and writes the rest once on the next attempt', async () => {
    const failing = SQLITE_SLICE + 5;
    await sql
      .raw(`create trigger audit_slice_refused before insert on audit_events when new.request_id = 'req-${failing}' begin select raise(abort, 'refused'); end`)
      .execute(t.db.kysely);
    const log = new AuditLog(t.db, quietLogger, { maxBatch: 10_000, flushMs: 60_000, retryMs: 60_000 });
    for (let i = 0; i < count; i++) log.record(sampleDecision(i));
    await log.flush();
    expect(log.pendingCount).toBe(count);
    expect(await storedRequestIds()).toEqual(Array.from({ length: SQLITE_SLICE }, (_, i) => `req-${i}`));

    await sql.raw('drop trigger audit_slice_refused').execute(t.db.kysely);
    await log.flush();
    expect(log.pendingCount).toBe(0);
    expect(await storedRequestIds()).toEqual(Array.from({ length: count }, (_, i) => `req-${i}`));
    expect(await verifyAuditChain(t.db.kysely)).toEqual(intact(count));
    await log.close();
  });
});
