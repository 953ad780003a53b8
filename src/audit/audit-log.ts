import type { Db } from '../storage/dialect.js';
import { isoTime, newId } from '../storage/ids.js';
import { appendAuditEvents, storedEventIds } from './append-events.js';
import { AuthFailureAggregator } from './auth-failures.js';
import type { AuditDecision, AuditEvent } from './audit-event.js';

export type { AuditDecision } from './audit-event.js';

export interface AuditLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface AuditLogOptions {
  /**
   * Events waiting that start a write at once (a write takes all that wait, so batches grow while writes
   * are slow). Small, so that an event waits for its write only milliseconds: under load 200 waiting
   * events were still there at the next young-generation collection and were copied into the old
   * generation — 180 KB per collection at 5,000 requests/s, with 2.5 ms pauses and full collections
   * after — where 50 leave next to nothing to copy (pauses of 0.6–1 ms).
   */
  maxBatch: number;
  /** The longest an event waits for a write when fewer than maxBatch are waiting. */
  flushMs: number;
  /**
   * Events waiting to be written at which the log is `full`: the server then refuses new requests (503) until
   * writes succeed again, instead of dropping events. Events of requests already admitted are still kept.
   * Each waiting event holds about 1 KB. The default (AUDIT_MAX_PENDING) is 50,000: seconds of a busy
   * process's requests, so that a storage stall of a second or two (an fsync behind another program's
   * writes; with WORKERS > 1 on SQLite, a worker waiting for the write lock while the one holding it waits
   * for the disk) is waited out rather than answered with 503s.
   */
  maxPending: number;
  /** How long after a failed write the next is tried. */
  retryMs: number;
  /** How long `close()` keeps trying to write what is left before it gives up (naming the count it left). */
  closeTimeoutMs: number;
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
 * (auth-failures.ts) and written as one aggregated event at the window's end.
 *
 * No recorded event is ever dropped. Events wait in one queue, oldest first, and leave it only once their
 * write has committed; a failed write (the database is down) is tried again every `retryMs` with everything
 * waiting, in the order it was recorded. Memory stays bounded because the server admits no new request while
 * the queue is `full` (app.ts answers 503). `close()` writes the open window and flushes what is pending, so
 * a graceful shutdown loses none.
 */
export class AuditLog {
  /** Recorded and not yet known to be written, oldest first. */
  readonly #pending: AuditEvent[] = [];
  #timer: NodeJS.Timeout | null = null;
  /** The writes running now, until nothing more was asked for or one failed. */
  #writing: Promise<void> | null = null;
  /** A flush was asked for while a write was running: write again after it. */
  #again = false;
  /**
   * The last write failed. It may have committed all the same (the answer to its COMMIT lost with the
   * connection), so the next one first leaves out the events that are already stored.
   */
  #failed = false;
  readonly #failures = new AuthFailureAggregator();
  #failureWindow: NodeJS.Timeout | null = null;
  readonly options: AuditLogOptions;

  constructor(
    private readonly db: Db,
    private readonly logger: AuditLogger,
    options: Partial<AuditLogOptions> = {},
  ) {
    this.options = { maxBatch: 50, flushMs: 250, maxPending: 50_000, retryMs: 1000, closeTimeoutMs: 5000, failureWindowMs: 60_000, ...options };
  }

  /** No new request may be admitted: as many events wait to be written as the log holds (maxPending). */
  get full(): boolean {
    return this.#pending.length >= this.options.maxPending;
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
    if (this.#pending.length === this.options.maxPending) {
      // From here until the queue is written, requests are refused (app.ts): said once, not per request.
      this.logger.error({ count: this.#pending.length }, 'audit.full');
    }
    // After a failure only the retry timer writes: every new event must not become another attempt.
    if (this.#pending.length >= this.options.maxBatch && !this.#failed) void this.flush();
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

  /**
   * Writes everything recorded so far. Resolves once it is stored, or once a write failed (the events stay
   * queued and are tried again after `retryMs`); never rejects.
   */
  flush(): Promise<void> {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (this.#writing) {
      this.#again = true;
      return this.#writing;
    }
    this.#writing = this.#writeAll();
    return this.#writing;
  }

  async #writeAll(): Promise<void> {
    try {
      do {
        this.#again = false;
        if (!(await this.#writeOnce())) break;
      } while (this.#again && this.#pending.length > 0);
    } finally {
      this.#writing = null;
    }
  }

  /** One transaction with every event waiting; they leave the queue only once it has committed. */
  async #writeOnce(): Promise<boolean> {
    const count = this.#pending.length;
    if (count === 0) return true;
    const batch = this.#pending.slice(0, count);
    try {
      let unwritten = batch;
      if (this.#failed) {
        const stored = await storedEventIds(this.db, batch.map((event) => event.id));
        unwritten = batch.filter((event) => !stored.has(event.id));
      }
      if (unwritten.length > 0) await appendAuditEvents(this.db, unwritten);
      const wasFull = this.full;
      this.#pending.splice(0, count);
      this.#failed = false;
      if (wasFull && !this.full) this.logger.info({ written: count }, 'audit.accepting');
      return true;
    } catch (error) {
      // The structured log line already carries every event; the database copy waits in the queue.
      this.logger.error({ err: error, count }, 'audit.write_failed');
      this.#failed = true;
      this.#timer ??= setTimeout(() => void this.flush(), this.options.retryMs);
      return false;
    }
  }

  /**
   * Writes the open window and everything pending, trying again for up to `closeTimeoutMs` while the
   * database fails; what is still unwritten then is named in the log (its events' log lines are their only
   * copy).
   */
  async close(): Promise<void> {
    this.closeFailureWindow();
    const deadline = Date.now() + this.options.closeTimeoutMs;
    await this.flush();
    while (this.#pending.length > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(this.options.retryMs, Math.max(0, deadline - Date.now()))));
      await this.flush();
    }
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#pending.length > 0) this.logger.error({ count: this.#pending.length }, 'audit.unwritten');
  }
}
