import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.js';
import { latestInvalidationSeq, readInvalidations, type Invalidation } from '../../storage/invalidations.js';

export interface InvalidationFeedOptions {
  /** How often the table is read; a change made by any process is applied here within about this long. */
  intervalMs?: number;
  /**
   * Events are re-read for this long after they were first seen. On PostgreSQL a sequence number is taken
   * at insert and becomes visible at commit, so a short transaction may commit after a later number was
   * already read; re-reading the recent window picks it up. Applying an event twice is harmless.
   */
  settleMs?: number;
  /** Events read per query; more are read in the same poll. */
  batch?: number;
  clock?: () => number;
  onError?: (error: unknown) => void;
  /**
   * Tells the other servers to read the table now (Redis, or the cluster's primary). Called after a poll
   * that found new events while this process had written some recently (`nudge`), so the changes a server
   * makes reach the others in milliseconds; polling stays the guarantee when the message is lost.
   */
  announce?: () => void;
}

/** A write is read back this long after it was made: its transaction has usually committed by then. */
const NUDGE_DELAY_MS = 20;

export interface InvalidationTargets {
  apply(events: readonly Invalidation[]): void;
  /** Called when events may have been missed (the feed could not read for too long): forget everything. */
  reset(): void;
}

/** A follower that stopped reading for this long may have missed pruned events (see purge-expired.ts). */
export const INVALIDATION_RETENTION_MS = 60 * 60 * 1000;

/**
 * Follows the `invalidations` table, the one source of truth for "what a server may no longer trust from
 * its caches". Polling keeps it the same on SQLite and PostgreSQL and needs no extra connection; a read of
 * the newest few rows by primary key costs microseconds, four times a second.
 */
export class InvalidationFeed {
  readonly #db: Kysely<Database>;
  readonly #targets: InvalidationTargets;
  readonly #intervalMs: number;
  readonly #settleMs: number;
  readonly #batch: number;
  readonly #clock: () => number;
  readonly #onError: (error: unknown) => void;
  /** Every event at or below this seq has been applied and is past its settle time. */
  #settled = 0;
  /** Events above `#settled`, with the time they were first seen. */
  readonly #recent = new Map<number, number>();
  #lastRead = 0;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  /** A poll was asked for while one ran: run another when it ends. */
  #again = false;
  /** New events are announced until this time (this process wrote an event shortly before). */
  #announceUntil = 0;
  readonly #announce: (() => void) | null;
  readonly #soon = new Set<NodeJS.Timeout>();

  constructor(db: Kysely<Database>, targets: InvalidationTargets, options: InvalidationFeedOptions = {}) {
    this.#db = db;
    this.#targets = targets;
    this.#intervalMs = options.intervalMs ?? 250;
    this.#settleMs = options.settleMs ?? 2000;
    this.#batch = options.batch ?? 500;
    this.#clock = options.clock ?? Date.now;
    this.#onError = options.onError ?? (() => {});
    this.#announce = options.announce ?? null;
  }

  /** Starts after the newest event: what happened before this server started is already in the database. */
  async start(): Promise<void> {
    this.#settled = await latestInvalidationSeq(this.#db);
    this.#lastRead = this.#clock();
    this.#timer = setInterval(() => {
      if (!this.#running) this.#run();
    }, this.#intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    for (const timer of this.#soon) clearTimeout(timer);
    this.#soon.clear();
    this.#again = false;
    await this.#running;
  }

  /** This process wrote an event: read it back shortly, and announce what is read for the settle time. */
  nudge(): void {
    this.#announceUntil = this.#clock() + this.#settleMs;
    this.#pollIn(NUDGE_DELAY_MS);
  }

  /** Another server announced new events: read them now. */
  pollNow(): void {
    this.#pollIn(0);
  }

  #pollIn(delayMs: number): void {
    if (!this.#timer || this.#soon.size > 0) return;
    const timer = setTimeout(() => {
      this.#soon.delete(timer);
      if (this.#running) this.#again = true;
      else this.#run();
    }, delayMs);
    timer.unref();
    this.#soon.add(timer);
  }

  #run(): void {
    this.#running = this.poll()
      .catch(this.#onError)
      .finally(() => {
        this.#running = null;
        if (this.#again && this.#timer) {
          this.#again = false;
          this.#run();
        }
      });
  }

  /** Reads and applies new events; exposed so that tests need not wait for the timer. */
  async poll(): Promise<void> {
    const now = this.#clock();
    if (now - this.#lastRead > INVALIDATION_RETENTION_MS / 2) {
      // Unreadable for half an hour (say, the database was down): events may have been pruned unseen.
      this.#targets.reset();
      this.#recent.clear();
      this.#settled = await latestInvalidationSeq(this.#db);
      this.#lastRead = now;
      return;
    }
    let after = this.#settled;
    const fresh: Invalidation[] = [];
    for (;;) {
      const events = await readInvalidations(this.#db, after, this.#batch);
      for (const event of events) {
        if (!this.#recent.has(event.seq)) {
          this.#recent.set(event.seq, now);
          fresh.push(event);
        }
      }
      if (events.length < this.#batch) break;
      after = events[events.length - 1]!.seq;
    }
    this.#lastRead = now;
    if (fresh.length > 0) {
      this.#targets.apply(fresh);
      if (now < this.#announceUntil) this.#announce?.();
    }
    this.#advance(now);
  }

  /** Moves `#settled` over the leading events that are past their settle time. */
  #advance(now: number): void {
    const seqs = [...this.#recent.keys()].sort((a, b) => a - b);
    for (const seq of seqs) {
      if (now - this.#recent.get(seq)! < this.#settleMs) break;
      this.#settled = seq;
      this.#recent.delete(seq);
    }
  }
}
