import type { Db } from '../storage/dialect.js';
import { isoTime, newId } from '../storage/ids.js';
import { appendAuditEvents } from './append-events.js';
import { AuthFailureAggregator } from './auth-failures.js';
import type { AuditDecision, AuditEvent } from './audit-event.js';

export type { AuditDecision } from './audit-event.js';

export interface AuditLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

const MAX_PENDING = 10_000;

export interface AuditLogOptions {
  maxBatch: number;
  flushMs: number;
  /** Refused credentials are counted per address for this long, then written as one event per address. */
  failureWindowMs: number;
  /** Sees every decision as it is recorded (metrics). */
  observe?: (decision: AuditDecision) => void;
  /** The W3C trace id of the request with this id, while it runs (the caller sent a `traceparent`). */
  traceOf?: (requestId: string) => string | null;
}

/**
 * Every authorization decision, allow and deny, is recorded (seed, Authorization rule 8): as a structured
 * log line at once, and in the `audit_events` hash chain in batches off the request path. Refused
 * credentials are the exception that keeps the log bounded: they are counted per address and window
 * (auth-failures.ts) and written as one aggregated event at the window's end. `close()` writes the open
 * window and flushes what is pending, so a graceful shutdown loses none.
 */
export class AuditLog {
  #pending: AuditEvent[] = [];
  #timer: NodeJS.Timeout | null = null;
  #flushing: Promise<void> = Promise.resolve();
  readonly #failures = new AuthFailureAggregator();
  #failureWindow: NodeJS.Timeout | null = null;
  readonly options: AuditLogOptions;

  constructor(
    private readonly db: Db,
    private readonly logger: AuditLogger,
    options: Partial<AuditLogOptions> = {},
  ) {
    this.options = { maxBatch: 200, flushMs: 250, failureWindowMs: 60_000, ...options };
  }

  /** Events recorded and not yet written to the database. */
  get pendingCount(): number {
    return this.#pending.length;
  }

  record(decision: AuditDecision): void {
    this.options.observe?.(decision);
    const now = Date.now();
    // Denials of callers nobody has authenticated (refused credentials; at the token endpoint also a
    // public client refused a grant, which needs no secret) are aggregated: anyone can cause them. An
    // authenticated caller's refusals stay one event each, and its budget is its client's.
    if (decision.decision === 'deny' && decision.subject === null) {
      this.#failures.add(decision, now);
      if (!this.#failureWindow) {
        this.#failureWindow = setTimeout(() => this.closeFailureWindow(), this.options.failureWindowMs);
        this.#failureWindow.unref();
      }
      return;
    }
    // One object of one shape per event: this runs on every request.
    const event: AuditEvent = {
      id: newId(now),
      time: isoTime(now),
      requestId: decision.requestId,
      subject: decision.subject,
      clientId: decision.clientId,
      interface: decision.interface,
      operation: decision.operation,
      resourceType: decision.resourceType,
      resourceId: decision.resourceId,
      decision: decision.decision,
      reason: decision.reason,
      count: null,
      sourceAddress: null,
      firstSeen: null,
      lastSeen: null,
      scopes: decision.scopes ?? null,
      traceId: decision.requestId === null ? null : (this.options.traceOf?.(decision.requestId) ?? null),
    };
    this.#append(event);
  }

  #append(event: AuditEvent): void {
    this.logger.info({ audit: event }, 'access.decided');
    this.#pending.push(event);
    if (this.#pending.length >= this.options.maxBatch) void this.flush();
    else this.#timer ??= setTimeout(() => void this.flush(), this.options.flushMs);
  }

  /**
   * Ends the current window now: its refused credentials become one event per address (and interface and
   * operation), and the next refusal opens a new window. Runs at the window's end and on close; a caller
   * that must know which refusals share a window (a test under load) ends it itself.
   */
  closeFailureWindow(): void {
    if (this.#failureWindow) clearTimeout(this.#failureWindow);
    this.#failureWindow = null;
    for (const event of this.#failures.drain(Date.now())) this.#append(event);
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

  async #write(batch: AuditEvent[]): Promise<void> {
    try {
      await appendAuditEvents(this.db, batch);
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

  async close(): Promise<void> {
    this.closeFailureWindow();
    await this.flush();
    if (this.#pending.length > 0) await this.flush();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
