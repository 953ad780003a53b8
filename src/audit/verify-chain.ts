import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.js';
import { chainHash, GENESIS_HASH } from './chain.js';
import { ARCHIVE_TYP, auditVerificationKeys, readAuditStatement, readSignedCheckpoint, toCheckpoint, type Checkpoint } from './checkpoints.js';
import type { AuditArchivesTable } from '../storage/schema.js';

/**
 * - `hash`: an event's fields no longer produce its hash (it was changed);
 * - `link`: its prev_hash is not the previous event's hash (an event before it was removed or reordered);
 * - `checkpoint`: the chain disagrees with a signed checkpoint at the checkpoint's head (the chain was
 *   recomputed after an edit, or events before the head were removed);
 * - `truncated`: a signed checkpoint vouches for events past the chain's end (the tail was cut);
 * - `missing-checkpoint`: checkpoint numbers have a gap, or the checkpoint given is not recorded;
 * - `signature`: a checkpoint's or an archive record's signature does not verify under an audit key of the
 *   database (a forged archive record is how events below a checkpoint could be deleted);
 * - `unexpected-key`: a checkpoint or archive record is signed by another key than the fingerprint the
 *   operator expects.
 */
export type ChainProblem = 'hash' | 'link' | 'checkpoint' | 'truncated' | 'missing-checkpoint' | 'signature' | 'unexpected-key';

interface Counts {
  /** Events walked (archived ones not included). */
  events: number;
  /** Signed checkpoints recorded in the database. */
  checkpoints: number;
  /** Events after the newest checkpoint (every event when none is signed yet): only the chain vouches for them. */
  uncovered: number;
  /** Fingerprints of the audit keys that signed the checkpoints and archive records. */
  keyFingerprints: string[];
  /**
   * Where the chain starts when old events were archived (`audit archive`): removing history is what an
   * archive does, so an archive nobody made is for the operator to notice here.
   */
  archived: { events: number; upToSeq: number; archivedAt: string } | null;
}

export type ChainReport =
  | ({ ok: true } & Counts)
  | ({ ok: false; brokenAt: { seq: number | null; id: string | null; problem: ChainProblem }; detail: string } & Counts);

export interface VerifyOptions {
  /** A checkpoint kept outside the database (compact JWS, as `audit checkpoint` prints it). */
  checkpoint?: string;
  /** The audit key's fingerprint the operator recorded: any other signer is refused. */
  keyFingerprint?: string;
  batchSize?: number;
}

/**
 * Walks the audit chain in order, from the genesis or from where the last archive left it, and checks it
 * against every signed checkpoint (and the one given): each event's hash and link, the head hash and
 * event count at each checkpoint, and that no checkpoint vouches for events that are gone.
 */
export async function verifyAuditChain(db: Kysely<Database>, options: VerifyOptions = {}): Promise<ChainReport> {
  const counts: Counts = { events: 0, checkpoints: 0, uncovered: 0, keyFingerprints: [], archived: null };
  const fail = (problem: ChainProblem, detail: string, seq: number | null = null, id: string | null = null): ChainReport => ({
    ok: false,
    ...counts,
    brokenAt: { seq, id, problem },
    detail,
  });

  const keys = await auditVerificationKeys(db);
  const checkpoints: Checkpoint[] = [];
  const rows = await db.selectFrom('auditCheckpoints').selectAll().orderBy('number').execute();
  for (const row of rows) {
    const stored = toCheckpoint(row);
    if (stored.number !== checkpoints.length + 1) return fail('missing-checkpoint', `checkpoint ${checkpoints.length + 1} is missing (the next recorded is ${stored.number})`);
    let signed: Checkpoint;
    try {
      signed = await readSignedCheckpoint(stored.jws, keys);
    } catch (error) {
      return fail('signature', `checkpoint ${stored.number}: ${(error as Error).message}`);
    }
    if (!sameFields(signed, stored, CHECKPOINT_FIELDS)) return fail('signature', `checkpoint ${stored.number}: its columns differ from what was signed`);
    if (options.keyFingerprint !== undefined && signed.keyFingerprint !== options.keyFingerprint) {
      return fail('unexpected-key', `checkpoint ${signed.number} is signed by key ${signed.keyFingerprint}, not ${options.keyFingerprint}`);
    }
    if (!counts.keyFingerprints.includes(signed.keyFingerprint)) counts.keyFingerprints.push(signed.keyFingerprint);
    checkpoints.push(signed);
    counts.checkpoints++;
  }
  if (options.checkpoint !== undefined) {
    let given: Checkpoint;
    try {
      given = await readSignedCheckpoint(options.checkpoint.trim(), keys);
    } catch (error) {
      return fail('signature', `the checkpoint given: ${(error as Error).message}`);
    }
    if (options.keyFingerprint !== undefined && given.keyFingerprint !== options.keyFingerprint) {
      return fail('unexpected-key', `the checkpoint given is signed by key ${given.keyFingerprint}, not ${options.keyFingerprint}`);
    }
    if (checkpoints[given.number - 1]?.jws !== given.jws) {
      return fail('missing-checkpoint', `checkpoint ${given.number} (the one given) is not recorded in the database`);
    }
  }

  let archive: Omit<AuditArchivesTable, 'jws'> | undefined;
  for (const row of await db.selectFrom('auditArchives').selectAll().orderBy('upToSeq').execute()) {
    const where = `the archive record up to seq ${row.upToSeq}`;
    let signed: Omit<AuditArchivesTable, 'jws'>;
    try {
      signed = await readAuditStatement<Omit<AuditArchivesTable, 'jws'>>(row.jws, keys, ARCHIVE_TYP);
    } catch (error) {
      return fail('signature', `${where}: ${(error as Error).message}`);
    }
    if (!sameFields(signed, row, ARCHIVE_FIELDS)) return fail('signature', `${where}: its columns differ from what was signed`);
    if (options.keyFingerprint !== undefined && signed.keyFingerprint !== options.keyFingerprint) {
      return fail('unexpected-key', `${where} is signed by key ${signed.keyFingerprint}, not ${options.keyFingerprint}`);
    }
    if (!counts.keyFingerprints.includes(signed.keyFingerprint)) counts.keyFingerprints.push(signed.keyFingerprint);
    const covering = checkpoints[signed.checkpointNumber - 1];
    if (!covering || covering.headSeq < signed.upToSeq) return fail('checkpoint', `${where} names checkpoint ${signed.checkpointNumber}, which does not cover it`);
    archive = signed;
  }
  if (archive) counts.archived = { events: Number(archive.eventCount), upToSeq: Number(archive.upToSeq), archivedAt: archive.archivedAt };
  let expectedPrev = archive?.lastHash ?? GENESIS_HASH;
  let position = archive ? Number(archive.eventCount) : 0;
  let afterSeq = archive ? Number(archive.upToSeq) : -1;
  const pending = new Map(checkpoints.filter((c) => c.headSeq > afterSeq).map((c) => [c.headSeq, c]));
  const newest = checkpoints.at(-1);
  for (;;) {
    const batch = await db.selectFrom('auditEvents').selectAll().where('seq', '>', afterSeq).orderBy('seq').limit(options.batchSize ?? 1000).execute();
    if (batch.length === 0) break;
    for (const row of batch) {
      const seq = Number(row.seq);
      counts.events++;
      position++;
      if (row.prevHash !== expectedPrev) return fail('link', "its prev_hash is not the previous event's hash (an event before it was removed or reordered)", seq, row.id);
      if (row.hash !== chainHash(expectedPrev, row)) return fail('hash', 'its fields no longer produce its hash (the event was changed)', seq, row.id);
      const checkpoint = pending.get(seq);
      if (checkpoint) {
        if (row.hash !== checkpoint.headHash || position !== checkpoint.eventCount) {
          return fail('checkpoint', `checkpoint ${checkpoint.number} signed hash ${checkpoint.headHash} as event ${checkpoint.eventCount}; the chain has ${row.hash} as event ${position}`, seq, row.id);
        }
        pending.delete(seq);
      }
      // With no checkpoint signed yet, only the chain vouches for any event.
      if (newest === undefined || seq > newest.headSeq) counts.uncovered++;
      expectedPrev = row.hash;
      afterSeq = seq;
    }
  }
  for (const checkpoint of pending.values()) {
    if (checkpoint.headSeq > afterSeq) {
      return fail('truncated', `checkpoint ${checkpoint.number} vouches for ${checkpoint.eventCount} events up to seq ${checkpoint.headSeq}; the chain ends after ${position} at seq ${afterSeq}`);
    }
    return fail('checkpoint', `event ${checkpoint.headSeq}, the head of checkpoint ${checkpoint.number}, is gone`, checkpoint.headSeq, null);
  }
  return { ok: true, ...counts };
}

/** The signed fields of a checkpoint and of an archive record: each must equal its stored column. */
const CHECKPOINT_FIELDS = ['number', 'headSeq', 'headHash', 'eventCount', 'time', 'keyFingerprint'] as const;
const ARCHIVE_FIELDS = ['upToSeq', 'lastHash', 'eventCount', 'checkpointNumber', 'archivedAt', 'keyFingerprint'] as const;

function sameFields<K extends string>(signed: Record<K, unknown>, stored: Record<K, unknown>, fields: readonly K[]): boolean {
  // Compared as text: a PostgreSQL bigint and the number that was signed are the same value.
  return fields.every((field) => String(signed[field]) === String(stored[field]));
}
