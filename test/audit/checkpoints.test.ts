import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { exportJWK, generateKeyPair, calculateJwkThumbprint, CompactSign } from 'jose';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { archiveAuditEvents, ArchiveRefusedError } from '../../src/audit/archive.js';
import { AuditLog } from '../../src/audit/audit-log.js';
import { chainHash, GENESIS_HASH } from '../../src/audit/chain.js';
import { ARCHIVE_TYP, auditSigningKey, CHECKPOINT_TYP, writeCheckpoint, type AuditSigningKey } from '../../src/audit/checkpoints.js';
import { verifyAuditChain } from '../../src/audit/verify-chain.js';
import { liftAppendOnly, sampleDecision, SILENT_LOGGER } from '../helpers/audit.js';
import { startTestApp } from '../helpers/app.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

// What the hash chain alone cannot show — a cut tail, a chain recomputed after an edit — shows against a
// signed checkpoint; and what a checkpoint cannot show by itself — its own removal, a planted key — shows
// against one kept outside the database and the key fingerprint the operator recorded.

const SECRET = 'test-key-encryption-secret-0123456789abcdef';

describe.each(DATABASE_KINDS)('signed audit checkpoints on %s', (kind) => {
  let t: TestDatabase;
  let key: AuditSigningKey;
  beforeEach(async () => {
    t = await createTestDatabase(kind);
    key = await auditSigningKey(t.db.kysely, SECRET);
  });
  afterEach(() => t.drop());

  async function record(count: number, from = 0): Promise<void> {
    const log = new AuditLog(t.db, SILENT_LOGGER, { maxBatch: 50, flushMs: 5 });
    for (let i = from; i < from + count; i++) log.record(sampleDecision(i));
    await log.close();
  }

  const rows = () => t.db.kysely.selectFrom('auditEvents').selectAll().orderBy('seq').execute();

  /** What an attacker with the database's owner rights does after editing: recompute every hash after it. */
  async function recomputeFrom(index: number): Promise<void> {
    const all = await rows();
    let prev = index === 0 ? GENESIS_HASH : all[index - 1]!.hash!;
    for (const row of all.slice(index)) {
      const hash = chainHash(prev, row);
      await t.db.kysely.updateTable('auditEvents').set({ prevHash: prev, hash }).where('seq', '=', row.seq).execute();
      prev = hash;
    }
  }

  async function liftCheckpointGuards(): Promise<void> {
    if (kind === 'postgres') await sql`alter table audit_checkpoints disable trigger user`.execute(t.db.kysely);
    else await sql`drop trigger audit_checkpoints_no_delete`.execute(t.db.kysely);
  }

  it('takes the other writer\'s checkpoint when another process writes the same number first (workers closing at once)', async () => {
    await record(5);
    let other: ReturnType<typeof writeCheckpoint> | null = null;
    // Another writer starts between this one's reads and its insert: whichever inserts second finds the number taken.
    const racingClock = () => {
      other ??= writeCheckpoint(t.db.kysely, key);
      return Date.now();
    };
    const mine = writeCheckpoint(t.db.kysely, key, racingClock);
    const [a, b] = await Promise.all([mine, (async () => { await mine.catch(() => {}); return other!; })()]);
    expect(a).toMatchObject({ number: 1, eventCount: 5 });
    expect(b).toEqual(a);
    expect(await t.db.kysely.selectFrom('auditCheckpoints').select('number').execute()).toEqual([{ number: 1 }]);
    expect(await verifyAuditChain(t.db.kysely, { keyFingerprint: key.fingerprint })).toMatchObject({ ok: true, checkpoints: 1 });
  });

  it('signs the head, the event count and the time with the audit key, numbered from 1', async () => {
    await record(12);
    const first = await writeCheckpoint(t.db.kysely, key);
    const all = await rows();
    expect(first).toEqual({
      number: 1,
      headSeq: all.at(-1)!.seq,
      headHash: all.at(-1)!.hash,
      eventCount: 12,
      time: expect.any(String),
      keyFingerprint: key.fingerprint,
      jws: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/),
    });
    // Nothing new: the same checkpoint, not another.
    expect(await writeCheckpoint(t.db.kysely, key)).toEqual(first);
    await record(3, 12);
    expect(await writeCheckpoint(t.db.kysely, key)).toMatchObject({ number: 2, eventCount: 15 });
    expect(await verifyAuditChain(t.db.kysely, { keyFingerprint: key.fingerprint })).toEqual({
      ok: true,
      events: 15,
      checkpoints: 2,
      uncovered: 0,
      keyFingerprints: [key.fingerprint],
      archived: null,
    });
    // The audit key is kept apart from the token keys, and the same key keeps signing.
    expect((await auditSigningKey(t.db.kysely, SECRET)).fingerprint).toBe(key.fingerprint);
    expect(await t.db.kysely.selectFrom('signingKeys').selectAll().execute()).toEqual([]);
  });

  it('detects a truncated tail that the chain alone cannot show', async () => {
    await record(150);
    await writeCheckpoint(t.db.kysely, key);
    await liftAppendOnly(t.db.kysely, kind);
    const all = await rows();
    await t.db.kysely.deleteFrom('auditEvents').where('seq', '>', all[49]!.seq).execute();
    const report = await verifyAuditChain(t.db.kysely);
    expect(report).toMatchObject({ ok: false, events: 50, brokenAt: { problem: 'truncated' } });
    expect(report.ok ? '' : report.detail).toContain('vouches for 150 events');
  });

  it('detects a chain recomputed after an edit (deny turned allow, every later hash rewritten)', async () => {
    await record(30);
    await writeCheckpoint(t.db.kysely, key);
    await liftAppendOnly(t.db.kysely, kind);
    const all = await rows();
    const denied = all.find((row) => row.decision === 'deny')!;
    await t.db.kysely.updateTable('auditEvents').set({ decision: 'allow', reason: 'granted' }).where('seq', '=', denied.seq).execute();
    await recomputeFrom(all.indexOf(denied));
    const report = await verifyAuditChain(t.db.kysely);
    expect(report).toMatchObject({ ok: false, brokenAt: { seq: all.at(-1)!.seq, problem: 'checkpoint' } });
  });

  it('detects a checkpoint removed from the database, against the one kept elsewhere', async () => {
    await record(10);
    await writeCheckpoint(t.db.kysely, key);
    await record(10, 10);
    const kept = (await writeCheckpoint(t.db.kysely, key))!;
    await liftCheckpointGuards();
    await liftAppendOnly(t.db.kysely, kind);
    // The tail and the checkpoint that covered it both removed: the database alone looks consistent...
    await t.db.kysely.deleteFrom('auditCheckpoints').where('number', '=', 2).execute();
    await t.db.kysely.deleteFrom('auditEvents').where('seq', '>', (await rows())[9]!.seq).execute();
    expect(await verifyAuditChain(t.db.kysely)).toMatchObject({ ok: true, events: 10 });
    // ...but not next to the checkpoint the operator kept.
    expect(await verifyAuditChain(t.db.kysely, { checkpoint: kept.jws })).toMatchObject({ ok: false, brokenAt: { problem: 'missing-checkpoint' } });
    // A gap in the numbering shows without it.
    await record(5, 20);
    await writeCheckpoint(t.db.kysely, key);
    await t.db.kysely.deleteFrom('auditCheckpoints').where('number', '=', 1).execute();
    expect(await verifyAuditChain(t.db.kysely)).toMatchObject({ ok: false, brokenAt: { problem: 'missing-checkpoint' } });
  });

  it('detects checkpoints signed by a key planted in the database, when the fingerprint is pinned', async () => {
    await record(5);
    await writeCheckpoint(t.db.kysely, key);
    // Someone with write access adds a key of their own and signs a checkpoint for a rewritten chain.
    const planted = await generateKeyPair('ES256', { extractable: true });
    const publicJwk = await exportJWK(planted.publicKey);
    const fingerprint = await calculateJwkThumbprint(publicJwk);
    await t.db.kysely.insertInto('auditKeys').values({ kid: fingerprint, publicJwk: JSON.stringify(publicJwk), privateJwkEncrypted: 'x', createdAt: new Date(0).toISOString() }).execute();
    await record(5, 5);
    const all = await rows();
    const claims = { number: 2, headSeq: all.at(-1)!.seq, headHash: all.at(-1)!.hash!, eventCount: 10, time: new Date().toISOString(), keyFingerprint: fingerprint };
    const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(claims))).setProtectedHeader({ alg: 'ES256', kid: fingerprint, typ: CHECKPOINT_TYP }).sign(planted.privateKey);
    await t.db.kysely.insertInto('auditCheckpoints').values({ ...claims, jws }).execute();

    const unpinned = await verifyAuditChain(t.db.kysely);
    expect(unpinned).toMatchObject({ ok: true, keyFingerprints: [key.fingerprint, fingerprint] });
    expect(await verifyAuditChain(t.db.kysely, { keyFingerprint: key.fingerprint })).toMatchObject({
      ok: false,
      brokenAt: { problem: 'unexpected-key' },
      detail: `checkpoint 2 is signed by key ${fingerprint}, not ${key.fingerprint}`,
    });
  });

  it('detects a checkpoint whose signature or columns were tampered with', async () => {
    await record(5);
    const checkpoint = (await writeCheckpoint(t.db.kysely, key))!;
    await liftCheckpointGuards();
    if (kind === 'sqlite') await sql`drop trigger audit_checkpoints_no_update`.execute(t.db.kysely);
    await t.db.kysely.updateTable('auditCheckpoints').set({ eventCount: 4 }).where('number', '=', 1).execute();
    expect(await verifyAuditChain(t.db.kysely)).toMatchObject({ ok: false, brokenAt: { problem: 'signature' } });
    const [header, payload, signature] = checkpoint.jws.split('.') as [string, string, string];
    const forged = `${header}.${payload}.${signature.slice(0, -4)}AAAA`;
    await t.db.kysely.updateTable('auditCheckpoints').set({ eventCount: 5, jws: forged }).where('number', '=', 1).execute();
    expect(await verifyAuditChain(t.db.kysely)).toMatchObject({ ok: false, brokenAt: { problem: 'signature' }, detail: 'checkpoint 1: the signature does not verify' });
  });

  describe('archive', () => {
    let dir: string;
    beforeEach(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-archive-'));
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    async function backdate(count: number, time: string): Promise<void> {
      await liftAppendOnly(t.db.kysely, kind);
      const all = await rows();
      for (const row of all.slice(0, count)) await t.db.kysely.updateTable('auditEvents').set({ time }).where('seq', '=', row.seq).execute();
      await recomputeFrom(0);
    }

    it('refuses to archive before any checkpoint, and the database refuses deletion above one', async () => {
      await record(10);
      await expect(archiveAuditEvents(t.db.kysely, key, '2999-01-01T00:00:00.000Z', path.join(dir, 'a.jsonl'))).rejects.toBeInstanceOf(ArchiveRefusedError);
      expect(fs.existsSync(path.join(dir, 'a.jsonl'))).toBe(false);
      await writeCheckpoint(t.db.kysely, key);
      await record(5, 10);
      const all = await rows();
      await expect(t.db.kysely.deleteFrom('auditEvents').where('seq', '=', all.at(-1)!.seq).execute()).rejects.toThrow(/only archived events may be deleted/);
      // Covered by a checkpoint is not enough: only what an archive record covers may go.
      await expect(t.db.kysely.deleteFrom('auditEvents').where('seq', '=', all[0]!.seq).execute()).rejects.toThrow(/only archived events may be deleted/);
      // Nor does a checkpoint row of one's own lift the guard.
      await t.db.kysely.insertInto('auditCheckpoints').values({ number: 2, headSeq: 999_999, headHash: 'x', eventCount: 0, time: 'x', keyFingerprint: 'x', jws: 'x' }).execute();
      await expect(t.db.kysely.deleteFrom('auditEvents').execute()).rejects.toThrow(/only archived events may be deleted/);
      await expect(t.db.kysely.updateTable('auditEvents').set({ decision: 'allow' }).where('seq', '=', all[0]!.seq).execute()).rejects.toThrow(/append-only/);
      expect(await rows()).toHaveLength(15);
    });

    it('finds events removed under a forged archive record, even when the record copies a real one', async () => {
      await record(40);
      const checkpoint = (await writeCheckpoint(t.db.kysely, key))!;
      const all = await rows();
      // Someone who can write rows (not change the schema) claims events 1..20 were archived, and deletes them.
      const claims = { upToSeq: all[19]!.seq, lastHash: all[19]!.hash!, eventCount: 20, checkpointNumber: checkpoint.number, archivedAt: '2026-11-23T08:00:00.000Z', keyFingerprint: key.fingerprint };
      await t.db.kysely.insertInto('auditArchives').values({ ...claims, jws: checkpoint.jws }).execute();
      await t.db.kysely.deleteFrom('auditEvents').where('seq', '<=', all[19]!.seq).execute();
      expect(await rows()).toHaveLength(20);
      expect(await verifyAuditChain(t.db.kysely, { checkpoint: checkpoint.jws, keyFingerprint: key.fingerprint })).toMatchObject({
        ok: false,
        brokenAt: { problem: 'signature' },
        detail: `the archive record up to seq ${all[19]!.seq}: not a ${ARCHIVE_TYP} statement`,
      });
      // Signed with a key of their own, planted beside the audit key: refused under the pinned fingerprint.
      const planted = await generateKeyPair('ES256', { extractable: true });
      const publicJwk = await exportJWK(planted.publicKey);
      const fingerprint = await calculateJwkThumbprint(publicJwk);
      await t.db.kysely.insertInto('auditKeys').values({ kid: fingerprint, publicJwk: JSON.stringify(publicJwk), privateJwkEncrypted: 'x', createdAt: new Date().toISOString() }).execute();
      const forged = { ...claims, upToSeq: all[20]!.seq, lastHash: all[20]!.hash!, eventCount: 21, keyFingerprint: fingerprint };
      const jws = await new CompactSign(new TextEncoder().encode(JSON.stringify(forged))).setProtectedHeader({ alg: 'ES256', kid: fingerprint, typ: ARCHIVE_TYP }).sign(planted.privateKey);
      await t.db.kysely.insertInto('auditArchives').values({ ...forged, jws }).execute();
      await t.db.kysely.deleteFrom('auditEvents').where('seq', '=', all[20]!.seq).execute();
      expect(await verifyAuditChain(t.db.kysely, { keyFingerprint: key.fingerprint })).toMatchObject({ ok: false, brokenAt: { problem: 'signature' } });
    });

    it('exports and removes old events covered by a checkpoint; what remains still verifies against every checkpoint', async () => {
      await record(40);
      await backdate(25, '2020-01-01T00:00:00.000Z');
      // The triggers are back in force for what follows (the backdating above stands for events written long ago).
      const first = (await writeCheckpoint(t.db.kysely, key))!;
      await record(10, 40);
      const out = path.join(dir, 'archive.jsonl');
      const result = await archiveAuditEvents(t.db.kysely, key, '2021-01-01T00:00:00.000Z', out);
      const archivedRows = fs.readFileSync(out, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(result).toEqual({ archived: 25, upToSeq: archivedRows[25]!.seq, checkpoint: first.number });
      expect(archivedRows[0]).toEqual({ archiveOf: 'portcullis audit events', previousHash: GENESIS_HASH, firstPosition: 1, checkpoint: first.jws });
      expect(archivedRows.at(-1)).toEqual({ upToSeq: archivedRows[25]!.seq, lastHash: archivedRows[25]!.hash, eventCount: 25 });
      expect(await rows()).toHaveLength(25);
      await writeCheckpoint(t.db.kysely, key);
      expect(await verifyAuditChain(t.db.kysely, { checkpoint: first.jws, keyFingerprint: key.fingerprint })).toEqual({
        ok: true,
        events: 25,
        checkpoints: 2,
        uncovered: 0,
        keyFingerprints: [key.fingerprint],
        archived: { events: 25, upToSeq: result.upToSeq, archivedAt: expect.any(String) },
      });
      // Nothing older left: a second run archives nothing and writes no file.
      expect(await archiveAuditEvents(t.db.kysely, key, '2021-01-01T00:00:00.000Z', path.join(dir, 'again.jsonl'))).toMatchObject({ archived: 0, upToSeq: null });
      expect(fs.existsSync(path.join(dir, 'again.jsonl'))).toBe(false);
    });
  });
});

describe.each(DATABASE_KINDS)('a running server signs checkpoints on %s', (kind) => {
  it('every AUDIT_CHECKPOINT_INTERVAL while events come in, and once more on shutdown for the last ones', async () => {
    const t = await startTestApp(kind, { AUDIT_CHECKPOINT_INTERVAL: '1' });
    let closed = false;
    try {
      const token = await t.adminClientToken();
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200);
      // The token's event and the request's are written apart: on a slow machine a checkpoint can fall between
      // them, and the next one covers both.
      const signed = await vi.waitFor(
        async () => {
          const rows = await t.database.db.kysely.selectFrom('auditCheckpoints').selectAll().orderBy('number').execute();
          if (rows.length === 0 || Number(rows.at(-1)!.eventCount) < 2) throw new Error('no checkpoint of both events yet');
          return rows;
        },
        { timeout: 5000, interval: 100 },
      );
      expect(signed.map((row) => row.number)).toEqual(signed.map((_, i) => i + 1));
      expect(signed.at(-1)).toMatchObject({ eventCount: 2 });
      // The last events of a graceful shutdown are covered too.
      for (let i = 0; i < 3; i++) expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200);
      await t.app.close();
      closed = true;
      const report = await verifyAuditChain(t.database.db.kysely);
      expect(report).toMatchObject({ ok: true, events: 5, uncovered: 0 });
    } finally {
      if (!closed) await t.app.close();
      await t.database.drop();
      fs.rmSync(t.dataDir, { recursive: true, force: true });
    }
  });
});

describe('the audit tables on sqlite refuse INSERT OR REPLACE', () => {
  it('so that rows cannot be removed by inserting over them, and a planted audit key neither signs nor stops anything', async () => {
    const t = await createTestDatabase('sqlite');
    try {
      const log = new AuditLog(t.db, SILENT_LOGGER, { maxBatch: 50, flushMs: 5 });
      for (let i = 0; i < 3; i++) log.record(sampleDecision(i));
      await log.close();
      const [first] = await t.db.kysely.selectFrom('auditEvents').selectAll().orderBy('seq').execute();
      const replace = sql`insert or replace into audit_events (seq, id, time, interface, operation, decision, reason) values (${first!.seq}, 'other-id', 'x', 'rest', 'x', 'allow', 'public')`;
      await expect(replace.execute(t.db.kysely)).rejects.toThrow(/may not be replaced/);
      const byId = sql`insert or replace into audit_events (id, time, interface, operation, decision, reason) values (${first!.id}, 'x', 'rest', 'x', 'allow', 'public')`;
      await expect(byId.execute(t.db.kysely)).rejects.toThrow(/may not be replaced/);
      expect(await verifyAuditChain(t.db.kysely)).toMatchObject({ ok: true, events: 3 });

      const key = await auditSigningKey(t.db.kysely, SECRET);
      await t.db.kysely.insertInto('auditKeys').values({ kid: 'planted', publicJwk: '{}', privateJwkEncrypted: 'junk', createdAt: new Date(0).toISOString() }).execute();
      expect((await auditSigningKey(t.db.kysely, SECRET)).fingerprint).toBe(key.fingerprint);
    } finally {
      await t.drop();
    }
  });
});
