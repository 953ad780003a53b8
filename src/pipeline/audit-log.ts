import type { Kysely } from 'kysely';
import { newId } from '../storage/ids.js';
import type { Database } from '../storage/schema.js';

export interface AuditDecision {
  requestId: string | null;
  subject: string | null;
  clientId: string | null;
  interface: 'rest' | 'graphql';
  operation: string;
  resourceType: string | null;
  resourceId: string | null;
  decision: 'allow' | 'deny';
  /** Which check decided: public, granted, authentication, scope, role, resource, validation, ... */
  reason: string;
}

export interface AuditLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * Every authorization decision, allow and deny, is recorded (seed, Authorization rule 8). Writes are
 * batched off the request path; `close()` flushes what is pending, so a graceful shutdown loses none.
 */
export class AuditLog {
  #pending: Database['auditEvents'][] = [];
  #timer: NodeJS.Timeout | null = null;
  #flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly logger: AuditLogger,
    private readonly options = { maxBatch: 200, flushMs: 250 },
  ) {}

  record(decision: AuditDecision): void {
    const event = { ...decision, id: newId(), time: new Date().toISOString() } as Database['auditEvents'];
    this.logger.info({ audit: { ...decision, id: event.id } }, 'access.decided');
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
    if (batch.length === 0) return this.#flushing;
    this.#flushing = this.#flushing.then(() => this.#write(batch));
    return this.#flushing;
  }

  async #write(batch: Database['auditEvents'][]): Promise<void> {
    try {
      await this.db.insertInto('auditEvents').values(batch.map(({ seq: _seq, ...event }) => event)).execute();
    } catch (error) {
      // The structured log line above already carries every event; the database copy is retried with the
      // next batch, up to a bound so that a database outage cannot exhaust memory.
      this.logger.error({ err: error, count: batch.length }, 'audit.write_failed');
      if (this.#pending.length + batch.length <= 10_000) this.#pending.unshift(...batch);
    }
  }

  async close(): Promise<void> {
    await this.flush();
    if (this.#pending.length > 0) await this.flush();
  }
}
