import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/audit/audit-log.js';
import { chainHash, GENESIS_HASH, type ChainedFields } from '../../src/audit/chain.js';
import { verifyAuditChain } from '../../src/audit/verify-chain.js';
import { newId } from '../../src/storage/ids.js';
import { liftAppendOnly, sampleDecision, SILENT_LOGGER } from '../helpers/audit.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

/** A verified chain with no checkpoints yet. */
const intact = (events: number) => ({ ok: true, events, checkpoints: 0, uncovered: events, keyFingerprints: [], archived: null });
const broken = (events: number, brokenAt: { seq: number; id: string; problem: string }) => ({
  ok: false,
  events,
  checkpoints: 0,
  // The events verified before the broken one, none of them under a checkpoint.
  uncovered: events - 1,
  keyFingerprints: [],
  archived: null,
  brokenAt,
  detail: expect.any(String),
});

describe.each(DATABASE_KINDS)('audit chain on %s', (kind) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(kind);
  });
  afterEach(async () => {
    await t.drop();
  });

  async function record(count: number, log = new AuditLog(t.db, SILENT_LOGGER, { maxBatch: 7, flushMs: 5 })): Promise<void> {
    for (let i = 0; i < count; i++) log.record(sampleDecision(i));
    await log.close();
  }

  const disableAppendOnly = () => liftAppendOnly(t.db.kysely, kind);

  it('writes every recorded event, in order, as a verifiable chain', async () => {
    await record(25);
    const rows = await t.db.kysely.selectFrom('auditEvents').selectAll().orderBy('seq').execute();
    expect(rows.map((r) => r.requestId)).toEqual(Array.from({ length: 25 }, (_, i) => `req-${i}`));
    expect(rows[0]!.prevHash).toBe('0'.repeat(64));
    expect(rows[1]!.prevHash).toBe(rows[0]!.hash);
    expect(await verifyAuditChain(t.db.kysely, { batchSize: 4 })).toEqual(intact(25));
  });

  it('refuses UPDATE and DELETE of audit events', async () => {
    await record(3);
    await expect(t.db.kysely.updateTable('auditEvents').set({ decision: 'allow' }).execute()).rejects.toThrow(/append-only/);
    await expect(t.db.kysely.deleteFrom('auditEvents').execute()).rejects.toThrow(/only archived events may be deleted/);
    if (kind === 'postgres') await expect(sql`truncate audit_events`.execute(t.db.kysely)).rejects.toThrow(/append-only/);
    expect(await verifyAuditChain(t.db.kysely)).toEqual(intact(3));
  });

  it('reports the first changed event', async () => {
    await record(10);
    await disableAppendOnly();
    const rows = await t.db.kysely.selectFrom('auditEvents').select(['seq', 'id']).orderBy('seq').execute();
    await t.db.kysely.updateTable('auditEvents').set({ decision: 'allow', reason: 'granted' }).where('seq', '=', rows[6]!.seq).execute();
    await t.db.kysely.updateTable('auditEvents').set({ subject: 'someone-else' }).where('seq', '=', rows[8]!.seq).execute();
    expect(await verifyAuditChain(t.db.kysely, { batchSize: 3 })).toEqual(broken(7, { seq: rows[6]!.seq, id: rows[6]!.id, problem: 'hash' }));
  });

  it('reports a change to any stored field of an event, the address and times of a single decision included', async () => {
    await record(10);
    await disableAppendOnly();
    const rows = await t.db.kysely.selectFrom('auditEvents').selectAll().orderBy('seq').execute();
    const target = rows[4]!;
    // What someone who can write to the database might put there: another value in every column the
    // server writes (a single decision is written without count, address and times: adding them counts).
    const forged: { [K in keyof ChainedFields]: ChainedFields[K] } = {
      id: newId(),
      time: new Date(Date.parse(target.time) + 1).toISOString(),
      requestId: 'req-forged',
      subject: 'someone-else',
      clientId: 'another-app',
      interface: target.interface === 'rest' ? 'graphql' : 'rest',
      operation: 'listPosts',
      resourceType: 'comment',
      resourceId: 'post-forged',
      decision: target.decision === 'allow' ? 'deny' : 'allow',
      reason: target.reason === 'scope' ? 'role' : 'scope',
      count: 2,
      sourceAddress: '203.0.113.66',
      firstSeen: target.time,
      lastSeen: target.time,
      scopes: 'read:posts',
      traceId: '0af7651916cd43dd8448eb211c80319c',
    };
    for (const [field, value] of Object.entries(forged)) {
      await t.db.kysely.updateTable('auditEvents').set({ [field]: value }).where('seq', '=', target.seq).execute();
      expect({ field, report: await verifyAuditChain(t.db.kysely) }).toEqual({ field, report: broken(5, { seq: target.seq, id: field === 'id' ? forged.id : target.id, problem: 'hash' }) });
      await t.db.kysely.updateTable('auditEvents').set({ [field]: target[field as keyof ChainedFields] }).where('seq', '=', target.seq).execute();
    }
    expect(await verifyAuditChain(t.db.kysely)).toEqual(intact(10));
  });

  it('reports a removed event at the link after it', async () => {
    await record(10);
    await disableAppendOnly();
    const rows = await t.db.kysely.selectFrom('auditEvents').select(['seq', 'id']).orderBy('seq').execute();
    await t.db.kysely.deleteFrom('auditEvents').where('seq', '=', rows[4]!.seq).execute();
    expect(await verifyAuditChain(t.db.kysely)).toEqual(broken(5, { seq: rows[5]!.seq, id: rows[5]!.id, problem: 'link' }));
  });

  it('keeps one chain when several writers share the database', async () => {
    const writers = [0, 1, 2].map(() => new AuditLog(t.db, SILENT_LOGGER, { maxBatch: 3, flushMs: 1 }));
    for (let i = 0; i < 30; i++) writers[i % 3]!.record(sampleDecision(i));
    await Promise.all(writers.map((w) => w.close()));
    expect(await verifyAuditChain(t.db.kysely)).toEqual(intact(30));
  });
});

describe('the hash of an event', () => {
  const single: ChainedFields = {
    ...{ id: 'e1', time: '2026-11-28T00:00:00.000Z', requestId: 'req-1', subject: 'u1', clientId: 'app', interface: 'rest', operation: 'getPost' },
    ...{ resourceType: 'post', resourceId: 'p1', decision: 'allow', reason: 'granted' },
    ...{ count: null, sourceAddress: null, firstSeen: null, lastSeen: null, scopes: 'read:posts', traceId: '0af7651916cd43dd8448eb211c80319c' },
  };

  it('tells a sign-in decision with scopes and a trace id from an aggregate whose fields spell the same (SQLite keeps text in any column)', () => {
    const spelledAlike = { ...single, count: 'scopes' as unknown as number, sourceAddress: single.scopes, firstSeen: 'traceId', lastSeen: single.traceId, scopes: null, traceId: null };
    expect(chainHash(GENESIS_HASH, spelledAlike)).not.toBe(chainHash(GENESIS_HASH, single));
  });

  it('tells a single decision from one given an address and times afterwards', () => {
    const plain = { ...single, scopes: null, traceId: null };
    const addressed = { ...plain, sourceAddress: '203.0.113.66', firstSeen: plain.time, lastSeen: plain.time };
    expect(chainHash(GENESIS_HASH, addressed)).not.toBe(chainHash(GENESIS_HASH, plain));
  });
});
