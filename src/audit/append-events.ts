import { sql, type CompiledQuery, type Insertable, type Kysely } from 'kysely';
import type { Db } from '../storage/dialect.js';
import type { SqliteHandle } from '../storage/sqlite-handle.js';
import type { Database } from '../storage/schema.js';
import { chainHash, GENESIS_HASH } from './chain.js';
import type { AuditEvent } from './audit-event.js';

const COLUMNS = [
  'id', 'time', 'requestId', 'subject', 'clientId', 'interface', 'operation', 'resourceType', 'resourceId', 'decision', 'reason', 'prevHash', 'hash',
  'count', 'sourceAddress', 'firstSeen', 'lastSeen', 'scopes', 'traceId',
] as const;

/** Serialises chain extension across instances sharing one PostgreSQL database. */
const CHAIN_LOCK = 0x706f7274; // "port"

/**
 * Events per SQLite transaction. An append runs on the event loop (about 10 µs an event: its hash, the row
 * and two index entries): a slice of 50 holds requests up for about half a millisecond, and requests are
 * served between slices, where one transaction of a whole batch (200 or more) held them for 2 ms and more.
 */
export const SQLITE_SLICE = 50;

/**
 * Appends events to the hash chain: each event's hash covers the previous one's, so the last stored hash is
 * read under the same write lock that guards the inserts (an advisory lock on PostgreSQL, BEGIN IMMEDIATE on
 * SQLite), and writers in several processes still make one chain. On PostgreSQL the batch is one
 * transaction; on SQLite it is written in transactions of SQLITE_SLICE events, in order, with the event loop
 * free between them. When one fails the slices before it stay written: the caller keeps the whole batch
 * and, on its next attempt, leaves out the events already stored (audit-log.ts).
 */
export async function appendAuditEvents(db: Db, batch: readonly AuditEvent[]): Promise<void> {
  if (db.sqlite) {
    const handle = db.sqlite;
    for (let start = 0; start < batch.length; start += SQLITE_SLICE) {
      if (start > 0) await new Promise((resolve) => setImmediate(resolve));
      const slice = batch.slice(start, start + SQLITE_SLICE);
      // Waits for any Kysely transaction on the shared connection to finish, then runs synchronously.
      await db.kysely.connection().execute(async () => appendOnSqlite(handle, slice));
    }
  } else {
    await appendOnPostgres(db.kysely, batch);
  }
}

// The newest event's hash; when every event was archived, the hash the archive ended with.
const LAST_HASH_SQL = `select coalesce(
  (select hash from audit_events order by seq desc limit 1),
  (select last_hash from audit_archives order by up_to_seq desc limit 1)) as hash`;
const INSERT_SQL = `insert into audit_events (id, time, request_id, subject, client_id, interface, operation, resource_type, resource_id, decision, reason, prev_hash, hash,
  count, source_address, first_seen, last_seen, scopes, trace_id)
  values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/**
 * The SQLite append itself, synchronous once SQLite's write lock is taken (a promise only while another
 * process holds it): the caller holds the connection (see appendAuditEvents).
 */
export function appendOnSqlite(handle: SqliteHandle, batch: readonly AuditEvent[]): void | Promise<void> {
  const last = handle.prepare(LAST_HASH_SQL);
  const insert = handle.prepare(INSERT_SQL);
  return handle.immediateTransaction(() => {
    let prevHash = (last.get() as { hash: string | null } | undefined)?.hash ?? GENESIS_HASH;
    for (const e of batch) {
      const hash = chainHash(prevHash, e);
      insert.run(e.id, e.time, e.requestId, e.subject, e.clientId, e.interface, e.operation, e.resourceType, e.resourceId, e.decision, e.reason, prevHash, hash,
        e.count, e.sourceAddress, e.firstSeen, e.lastSeen, e.scopes, e.traceId);
      prevHash = hash;
    }
  });
}

/** Rows per INSERT statement: 50 x 19 parameters stays far below PostgreSQL's limit. */
const CHUNK = 50;
const inserts = new WeakMap<Kysely<Database>, Map<number, CompiledQuery>>();

async function appendOnPostgres(kysely: Kysely<Database>, batch: readonly AuditEvent[]): Promise<void> {
  await kysely.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${CHAIN_LOCK})`.execute(trx);
    const { rows } = await sql<{ hash: string | null }>`${sql.raw(LAST_HASH_SQL)}`.execute(trx);
    let prevHash = rows[0]?.hash ?? GENESIS_HASH;
    const parameters: unknown[] = [];
    for (const event of batch) {
      const hash = chainHash(prevHash, event);
      parameters.push(event.id, event.time, event.requestId, event.subject, event.clientId, event.interface, event.operation,
        event.resourceType, event.resourceId, event.decision, event.reason, prevHash, hash,
        event.count, event.sourceAddress, event.firstSeen, event.lastSeen, event.scopes, event.traceId);
      prevHash = hash;
    }
    // Multi-row inserts of at most CHUNK rows, each shape compiled once: one statement per row would cost a
    // round trip per event.
    const width = COLUMNS.length;
    for (let start = 0; start < batch.length; start += CHUNK) {
      const rows = Math.min(CHUNK, batch.length - start);
      await trx.executeQuery({ ...insertFor(kysely, rows), parameters: parameters.slice(start * width, (start + rows) * width) });
    }
  });
}

function insertFor(kysely: Kysely<Database>, rows: number): CompiledQuery {
  let byRows = inserts.get(kysely);
  if (!byRows) inserts.set(kysely, (byRows = new Map()));
  let insert = byRows.get(rows);
  if (!insert) {
    const template = Object.fromEntries(COLUMNS.map((column) => [column, ''])) as unknown as Insertable<Database['auditEvents']>;
    insert = kysely.insertInto('auditEvents').values(Array.from({ length: rows }, () => template)).compile();
    byRows.set(rows, insert);
  }
  return insert;
}

/** Ids per lookup: far below either database's limit on bound parameters. */
const LOOKUP_CHUNK = 500;

/**
 * Which of these events the table already holds: a write whose COMMIT was sent but never answered (the
 * connection was lost) may have committed, and its events must not be appended a second time.
 */
export async function storedEventIds(db: Db, ids: readonly string[]): Promise<Set<string>> {
  const stored = new Set<string>();
  for (let start = 0; start < ids.length; start += LOOKUP_CHUNK) {
    const rows = await db.kysely.selectFrom('auditEvents').select('id').where('id', 'in', ids.slice(start, start + LOOKUP_CHUNK)).execute();
    for (const row of rows) stored.add(row.id);
  }
  return stored;
}
