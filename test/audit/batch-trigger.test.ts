import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/audit/audit-log.js';
import { sampleDecision } from '../helpers/audit.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

// With the default options, 50 waiting events start a write at once; fewer wait for the 250 ms timer. An
// event therefore waits milliseconds under load, not until a larger batch fills.
describe.each(DATABASE_KINDS)('when the audit log writes, on %s', (kind) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(kind);
  });
  afterEach(async () => {
    await t.drop();
  });

  const stored = async () => Number((await t.db.kysely.selectFrom('auditEvents').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);

  it('writes as soon as 50 events wait (the default batch), and fewer after the timer', async () => {
    // The timer pushed out of reach: only the batch size can start the first write.
    const log = new AuditLog(t.db, { info: () => {}, error: () => {} }, { flushMs: 60_000 });
    for (let i = 0; i < 49; i++) log.record(sampleDecision(i));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await stored()).toBe(0);
    log.record(sampleDecision(49));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect({ stored: await stored(), pending: log.pendingCount }).toEqual({ stored: 50, pending: 0 });
    await log.close();

    // With the default timer, one event is written within its 250 ms.
    const timed = new AuditLog(t.db, { info: () => {}, error: () => {} });
    timed.record(sampleDecision(50));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await stored()).toBe(50);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await stored()).toBe(51);
    await timed.close();
  });
});
