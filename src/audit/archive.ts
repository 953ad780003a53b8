import fs from 'node:fs';
import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.js';
import { chainHash, GENESIS_HASH } from './chain.js';
import { ARCHIVE_TYP, latestCheckpoint, signAuditStatement, type AuditSigningKey } from './checkpoints.js';

export interface ArchiveResult {
  archived: number;
  /** The last archived event's seq, or null when nothing was old enough. */
  upToSeq: number | null;
  checkpoint: number;
}

export class ArchiveRefusedError extends Error {}

/**
 * Retention: exports the oldest events — those before `before` and at or below the newest signed
 * checkpoint — to `out` as JSON lines (a header with the hash the export continues from and the
 * checkpoint that vouches for it, the events, a footer with the last hash), then removes them and records
 * where the chain now starts (`audit_archives`), so `audit verify` still checks what remains against
 * every later checkpoint. The database's triggers refuse any other deletion. Only a prefix of the chain is
 * archived, and only a chain that verifies up to there.
 */
export async function archiveAuditEvents(db: Kysely<Database>, key: AuditSigningKey, before: string, out: string, batchSize = 1000): Promise<ArchiveResult> {
  const checkpoint = await latestCheckpoint(db);
  if (!checkpoint) throw new ArchiveRefusedError('no signed checkpoint yet: run `audit checkpoint` first; only events it vouches for may be archived');
  const previous = await db.selectFrom('auditArchives').selectAll().orderBy('upToSeq', 'desc').limit(1).executeTakeFirst();
  const startHash = previous?.lastHash ?? GENESIS_HASH;
  let expectedPrev = startHash;
  let position = previous ? Number(previous.eventCount) : 0;
  let afterSeq = previous ? Number(previous.upToSeq) : -1;
  const firstAfter = afterSeq;

  const fd = fs.openSync(out, 'wx', 0o600);
  let archived = 0;
  try {
    fs.writeSync(fd, `${JSON.stringify({ archiveOf: 'portcullis audit events', previousHash: startHash, firstPosition: position + 1, checkpoint: checkpoint.jws })}\n`);
    scan: for (;;) {
      const rows = await db
        .selectFrom('auditEvents')
        .selectAll()
        .where('seq', '>', afterSeq)
        .where('seq', '<=', checkpoint.headSeq)
        .orderBy('seq')
        .limit(batchSize)
        .execute();
      if (rows.length === 0) break;
      for (const row of rows) {
        if (row.time >= before) break scan;
        if (row.prevHash !== expectedPrev || row.hash !== chainHash(expectedPrev, row)) {
          throw new ArchiveRefusedError(`the chain is broken at seq ${row.seq}: run \`audit verify\`; nothing was archived`);
        }
        fs.writeSync(fd, `${JSON.stringify({ ...row, seq: Number(row.seq) })}\n`);
        expectedPrev = row.hash;
        afterSeq = Number(row.seq);
        position++;
        archived++;
      }
    }
    fs.writeSync(fd, `${JSON.stringify({ upToSeq: archived > 0 ? afterSeq : null, lastHash: expectedPrev, eventCount: position })}\n`);
    fs.fsyncSync(fd);
  } catch (error) {
    fs.closeSync(fd);
    fs.rmSync(out, { force: true });
    throw error;
  }
  fs.closeSync(fd);
  if (archived === 0) {
    fs.rmSync(out);
    return { archived, upToSeq: null, checkpoint: checkpoint.number };
  }

  const record = {
    upToSeq: afterSeq,
    lastHash: expectedPrev,
    eventCount: position,
    checkpointNumber: checkpoint.number,
    archivedAt: new Date().toISOString(),
    keyFingerprint: key.fingerprint,
  };
  const jws = await signAuditStatement(key, ARCHIVE_TYP, record);
  // The record first: the triggers let a DELETE through only for events an archive record covers.
  await db.transaction().execute(async (trx) => {
    await trx.insertInto('auditArchives').values({ ...record, jws }).execute();
    await trx.deleteFrom('auditEvents').where('seq', '>', firstAfter).where('seq', '<=', afterSeq).execute();
  });
  return { archived, upToSeq: afterSeq, checkpoint: checkpoint.number };
}
