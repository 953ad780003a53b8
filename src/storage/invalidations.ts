import type { CompiledQuery, Kysely } from 'kysely';
import type { Database } from './schema.js';
import { nowIso } from './ids.js';

/**
 * What a change makes stale in every server's caches:
 * - `token`: one access token (target: its jti);
 * - `user`: a user's status or role, and the tokens issued on the user's behalf (target: the user's id);
 * - `client`: a client's registration (role, scopes, existence) and every token issued to it, its users'
 *   included (target: the client_id);
 * - `grant`: every token of one user grant, a code exchange's or a refresh family's (target: the grant id).
 */
export type InvalidationKind = 'token' | 'user' | 'client' | 'grant';

export interface Invalidation {
  seq: number;
  kind: InvalidationKind;
  target: string;
}

const writeListeners = new Set<() => void>();

/**
 * Calls `listener` whenever this process writes an event (before its transaction commits): the feed of a
 * server in this process reads the table soon after and tells the other servers (Redis, or the cluster's
 * primary) to read it too, instead of leaving them to find it at their next poll. Returns the unsubscribe.
 */
export function onInvalidationWritten(listener: () => void): () => void {
  writeListeners.add(listener);
  return () => writeListeners.delete(listener);
}

/** For writers that insert events with their own compiled statement (grant-store.ts). */
export function noteInvalidationWritten(): void {
  for (const listener of writeListeners) listener();
}

/**
 * Records a change for every running server to follow (invalidation-feed.ts). Call it with the transaction
 * that makes the change, so a server never sees the event without the change or the change without it.
 */
export async function recordInvalidation(db: Kysely<Database>, kind: InvalidationKind, target: string): Promise<void> {
  await db.insertInto('invalidations').values({ kind, target, createdAt: nowIso() }).execute();
  noteInvalidationWritten();
}

/** Events after `afterSeq`, oldest first, at most `limit`. */
export async function readInvalidations(db: Kysely<Database>, afterSeq: number, limit: number): Promise<Invalidation[]> {
  const { rows } = await db.executeQuery<{ seq: number | string; kind: string; target: string }>({ ...readStatement(db), parameters: [afterSeq, limit] });
  // bigserial comes back from PostgreSQL as a string.
  return rows.map((row) => ({ seq: Number(row.seq), kind: row.kind as InvalidationKind, target: row.target }));
}

const readStatements = new WeakMap<Kysely<Database>, CompiledQuery>();

/** The read, compiled once per database: every process runs it four times a second, mostly to find nothing. */
function readStatement(db: Kysely<Database>): CompiledQuery {
  let statement = readStatements.get(db);
  if (!statement) {
    statement = db.selectFrom('invalidations').select(['seq', 'kind', 'target']).where('seq', '>', 0).orderBy('seq').limit(1).compile();
    // Its two parameters, in this order: the sequence to read after, and the limit.
    if (statement.parameters.length !== 2) throw new Error('the invalidations read was not compiled with its two parameters');
    readStatements.set(db, statement);
  }
  return statement;
}

export async function latestInvalidationSeq(db: Kysely<Database>): Promise<number> {
  const row = await db.selectFrom('invalidations').select((eb) => eb.fn.max('seq').as('seq')).executeTakeFirst();
  return row?.seq == null ? 0 : Number(row.seq);
}

/** Followers read only the last few seconds; a day of history is more than any server needs. */
export async function purgeOldInvalidations(db: Kysely<Database>, before: string): Promise<void> {
  await db.deleteFrom('invalidations').where('createdAt', '<', before).execute();
}
