import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.js';
import { chainHash, GENESIS_HASH } from './chain.js';

export type ChainReport =
  | { ok: true; events: number }
  | { ok: false; events: number; brokenAt: { seq: number; id: string; problem: 'hash' | 'link' } };

/**
 * Walks the audit chain in order. `hash`: the event's fields no longer produce its hash (it was changed);
 * `link`: its prev_hash is not the previous event's hash (an event before it was removed or reordered).
 */
export async function verifyAuditChain(db: Kysely<Database>, batchSize = 1000): Promise<ChainReport> {
  let expectedPrev = GENESIS_HASH;
  let afterSeq = -1;
  let events = 0;
  for (;;) {
    const rows = await db.selectFrom('auditEvents').selectAll().where('seq', '>', afterSeq).orderBy('seq').limit(batchSize).execute();
    if (rows.length === 0) return { ok: true, events };
    for (const row of rows) {
      events++;
      if (row.prevHash !== expectedPrev) return { ok: false, events, brokenAt: { seq: row.seq, id: row.id, problem: 'link' } };
      if (row.hash !== chainHash(expectedPrev, row)) return { ok: false, events, brokenAt: { seq: row.seq, id: row.id, problem: 'hash' } };
      expectedPrev = row.hash;
      afterSeq = row.seq;
    }
  }
}
