import { sql, type CompiledQuery, type Insertable, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.js';
import type { Db } from '../storage/dialect.js';
import { newId } from '../storage/ids.js';
import { chainHash, GENESIS_HASH } from './chain.js';

export interface AuditDecision {
  requestId: string | null;
  subject: string | null;
  clientId: string | null;
  interface: 'rest' | 'graphql';
  operation: string;
  resourceType: string | null;
  resourceId: string | null;
  decision: 'allow' | 'deny';
  /** Which check decided: public, granted, authentication, scope, role, resource, ... */
  reason: string;
}

export interface AuditLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

type PendingEvent = AuditDecision & { id: string; time: string };

const COLUMNS = [
  'id', 'time', 'requestId', 'subject', 'clientId', 'interface', 'operation', 'resourceType', 'resourceId', 'decision', 'reason', 'prevHash', 'hash',
] as const;

/** Rows per INSERT statement: 50 x 13 parameters stays far below SQLite's and PostgreSQL's limits. */
const CHUNK = 50;

function compileInsert(db: Kysely<Database>, rows: number): CompiledQuery {
  const template = Object.fromEntries(COLUMNS.map((column) => [column, ''])) as unknown as Insertable<Database['auditEvents']>;
  return db.insertInto('auditEvents').values(Array.from({ length: rows }, () => template)).compile();
}

/** Serialises chain extension across instances sharing one PostgreSQL database. */
const CHAIN_LOCK = 0x706f7274; // "port"
const MAX_PENDING = 10_000;

/**
 * Every authorization decision, allow and deny, is recorded (seed, Authorization rule 8): as a structured
 * log line at once, and in the `audit_events` hash chain in batches off the request path. `close()`
 * flushes what is pending, so a graceful shutdown loses none.
 */
export class AuditLog {
  #pending: PendingEvent[] = [];
  #timer: NodeJS.Timeout | null = null;
  #flushing: Promise<void> = Promise.resolve();
  readonly #inserts = new Map<number, CompiledQuery>();

  constructor(
    private readonly db: Db,
    private readonly logger: AuditLogger,
    private readonly options = { maxBatch: 200, flushMs: 250 },
  ) {}

  record(decision: AuditDecision): void {
    const event: PendingEvent = { ...decision, id: newId(), time: new Date().toISOString() };
    this.logger.info({ audit: event }, 'access.decided');
    this.#pending.push(event);
    if (this.#pending.length >= this.options.maxBatch) void this.flush();
    else this.#timer ??= setTimeout(() => void this.flush(), this.options.flushMs);
  }

  flush(): Promise<void> {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    const batch = this.#pending;
    this.#pending = [];
    if (batch.length > 0) this.#flushing = this.#flushing.then(() => this.#write(batch));
    return this.#flushing;
  }

  async #write(batch: PendingEvent[]): Promise<void> {
    try {
      await this.db.kysely.transaction().execute(async (trx) => {
        if (this.db.dialect === 'postgres') await sql`select pg_advisory_xact_lock(${CHAIN_LOCK})`.execute(trx);
        const last = await trx.selectFrom('auditEvents').select('hash').orderBy('seq', 'desc').limit(1).executeTakeFirst();
        let prevHash = last?.hash ?? GENESIS_HASH;
        const rows = batch.map((event) => {
          const row = { ...event, prevHash, hash: chainHash(prevHash, event) };
          prevHash = row.hash;
          return row;
        });
        // Multi-row inserts of at most CHUNK rows, each shape compiled once: building a Kysely query per
        // batch, or running one statement per row, would cost more than the write itself.
        for (let start = 0; start < rows.length; start += CHUNK) {
          const chunk = rows.slice(start, start + CHUNK);
          const insert = this.#insertFor(trx, chunk.length);
          await trx.executeQuery({ ...insert, parameters: chunk.flatMap((row) => COLUMNS.map((column) => row[column])) });
        }
      });
    } catch (error) {
      // The structured log line already carries every event; the database copy is retried with the next
      // batch, up to a bound so that a database outage cannot exhaust memory.
      this.logger.error({ err: error, count: batch.length }, 'audit.write_failed');
      if (this.#pending.length + batch.length <= MAX_PENDING) {
        this.#pending.unshift(...batch);
        this.#timer ??= setTimeout(() => void this.flush(), this.options.flushMs * 4);
      }
    }
  }

  #insertFor(db: Kysely<Database>, rows: number): CompiledQuery {
    let insert = this.#inserts.get(rows);
    if (!insert) {
      insert = compileInsert(db, rows);
      this.#inserts.set(rows, insert);
    }
    return insert;
  }

  async close(): Promise<void> {
    await this.flush();
    if (this.#pending.length > 0) await this.flush();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
