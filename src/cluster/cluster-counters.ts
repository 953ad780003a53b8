import type { Cluster } from 'node:cluster';
import { WindowCounters, type LimiterStore, type SharedCounters, type SharedSpent } from '../limits/rate-limit.js';

/**
 * The rate-limit counters of one instance's workers (WORKERS > 1 without Redis), kept in the primary. A
 * worker asks for every count of one event-loop turn in one message up node:cluster's IPC channel — the
 * budgets of all the requests that turn admitted — and the primary answers them in one message. The
 * primary counts with the same fixed windows a single process does (WindowCounters), so the workers draw
 * on one budget per key.
 *
 * A key a worker spends on often (a busy client) is leased a few points of its budget with the answer:
 * the worker spends them without asking, so such a key costs a message per lease rather than per request.
 * The primary counts leased points as spent, so the workers together never admit more than the budget; a
 * lease is small against what the budget has left (a budget too small to share is never leased), and
 * what a worker has not spent of it goes back after LEASE_MS, so a request may be refused early, while
 * another worker still holds points, for that long at most.
 */

/** The most points one lease carries. */
export const LEASE_POINTS = 32;
/** A lease takes at most this fraction of what the key's budget has left: budgets under 64 are not leased. */
export const LEASE_SHARE = 64;
/** How long a worker may spend a lease, and how long a key stays busy after its last request. */
export const LEASE_MS = 50;

/**
 * take: spend `weight` points, and lease up to `lease` more within `budget`; give: hand points back (to the
 * window that ends at `endsAt`, or with 0 to the open one); forget: drop the key's window.
 */
export type CounterOperation =
  | [kind: 'take', policy: string, windowMs: number, key: string, weight: number, budget: number, lease: number]
  | [kind: 'give', policy: string, windowMs: number, key: string, weight: number, endsAt: number]
  | [kind: 'forget', policy: string, windowMs: number, key: string];

/** What the key has spent in its window after the operation (leased points included), when that window ends (epoch ms), the points leased. */
export type CounterAnswer = [points: number, endsAt: number, leased: number];

interface CountersRequest {
  portcullisCounters: 'ask';
  id: number;
  operations: CounterOperation[];
}

interface CountersReply {
  portcullisCounters: 'answer';
  id: number;
  answers: CounterAnswer[];
}

function isRequest(value: unknown): value is CountersRequest {
  const candidate = value as Partial<CountersRequest> | null;
  return candidate?.portcullisCounters === 'ask' && typeof candidate.id === 'number' && Array.isArray(candidate.operations);
}

function isReply(value: unknown): value is CountersReply {
  const candidate = value as Partial<CountersReply> | null;
  return candidate?.portcullisCounters === 'answer' && typeof candidate.id === 'number' && Array.isArray(candidate.answers);
}

const points = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value >= 0;

function isOperation(value: unknown): value is CounterOperation {
  if (!Array.isArray(value)) return false;
  const [kind, policy, windowMs, key, weight, last, lease] = value as unknown[];
  if (typeof policy !== 'string' || typeof key !== 'string' || typeof windowMs !== 'number' || !(windowMs > 0)) return false;
  if (kind === 'take') return value.length === 7 && points(weight) && points(last) && points(lease);
  if (kind === 'give') return value.length === 6 && points(weight) && points(last);
  return kind === 'forget' && value.length === 4;
}

const EMPTY: CounterAnswer = [0, 0, 0];

/** The primary's counters, by policy: each operation of a request, in order, and its answer. */
export class PrimaryCounters {
  readonly #policies = new Map<string, WindowCounters>();

  answer(operations: readonly unknown[], now = Date.now()): CounterAnswer[] {
    return operations.map((operation) => {
      // Sent by this program's workers; anything else is answered as an empty window rather than thrown.
      if (!isOperation(operation)) return EMPTY;
      const [kind, policy, windowMs, key] = operation;
      let counters = this.#policies.get(policy);
      if (!counters) this.#policies.set(policy, (counters = new WindowCounters(windowMs)));
      if (kind === 'take') {
        const [, , , , weight, budget, lease] = operation;
        let spent = counters.take(key, weight, now);
        const leased = Math.min(Math.floor(lease), Math.floor((budget - spent.points) / LEASE_SHARE));
        if (leased > 0) spent = counters.take(key, leased, now);
        return [spent.points, now + spent.msLeft, Math.max(0, leased)];
      }
      if (kind === 'give') return [counters.give(key, operation[4], now, operation[5] || null), 0, 0];
      counters.delete(key);
      return EMPTY;
    });
  }
}

/** In the primary: answers every worker's counter requests. */
export function serveCounters(cluster: Cluster, counters = new PrimaryCounters()): void {
  cluster.on('message', (worker, value: unknown) => {
    if (!isRequest(value) || !worker.isConnected()) return;
    const reply: CountersReply = { portcullisCounters: 'answer', id: value.id, answers: counters.answer(value.operations) };
    worker.send(reply, undefined, () => {});
  });
}

/** The worker's side of the IPC channel (process.send and its 'message' events), replaceable in tests. */
export interface CountersChannel {
  send(message: CountersRequest, sent: (error: Error | null) => void): boolean;
  onMessage(handler: (value: unknown) => void): void;
}

const processChannel: CountersChannel = {
  send(message, sent) {
    if (!process.connected || !process.send) return false;
    process.send(message, undefined, undefined, sent);
    return true;
  },
  onMessage(handler) {
    process.on('message', handler);
  },
};

interface Pending {
  operation: CounterOperation;
  resolve(answer: CounterAnswer): void;
  reject(error: Error): void;
}

/**
 * In a worker: the operations asked for during one event-loop turn leave together once the turn's I/O is
 * handled (setImmediate). An answer not back within `timeoutMs` (the primary busy or gone) fails its
 * operations, and the rate-limit policy counts them in this process instead.
 */
export class ClusterCounters {
  #queued: Pending[] = [];
  #scheduled = false;
  #nextId = 1;
  readonly #waiting = new Map<number, { batch: Pending[]; timer: NodeJS.Timeout }>();

  constructor(
    private readonly channel: CountersChannel = processChannel,
    private readonly timeoutMs = 1000,
  ) {
    channel.onMessage((value) => {
      if (isReply(value)) this.#answered(value);
    });
  }

  ask(operation: CounterOperation): Promise<CounterAnswer> {
    return new Promise((resolve, reject) => {
      this.#queued.push({ operation, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.#send());
      }
    });
  }

  /** Operations sent and not answered yet (tests). */
  get waiting(): number {
    let count = 0;
    for (const { batch } of this.#waiting.values()) count += batch.length;
    return count;
  }

  #send(): void {
    this.#scheduled = false;
    const batch = this.#queued;
    this.#queued = [];
    if (batch.length === 0) return;
    const id = this.#nextId++;
    const timer = setTimeout(() => this.#fail(id, new Error('the primary did not answer in time')), this.timeoutMs);
    timer.unref();
    this.#waiting.set(id, { batch, timer });
    const message: CountersRequest = { portcullisCounters: 'ask', id, operations: batch.map((pending) => pending.operation) };
    const sending = this.channel.send(message, (error) => {
      if (error) this.#fail(id, error);
    });
    if (!sending) this.#fail(id, new Error('no IPC channel to the primary'));
  }

  #answered(reply: CountersReply): void {
    const entry = this.#waiting.get(reply.id);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.#waiting.delete(reply.id);
    entry.batch.forEach((pending, i) => {
      const answer = reply.answers[i];
      if (answer) pending.resolve(answer);
      else pending.reject(new Error('the primary answered fewer operations than were asked'));
    });
  }

  #fail(id: number, error: Error): void {
    const entry = this.#waiting.get(id);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.#waiting.delete(id);
    for (const pending of entry.batch) pending.reject(error);
  }
}

/** What a worker knows of a key it spends on: the points it holds, and when it last spent. */
interface Lease {
  /** Leased points not spent yet. */
  left: number;
  /** What the key's window had spent, leases included, when the primary last answered. */
  points: number;
  endsAt: number;
  /** When the points left were leased: they are spent until LEASE_MS after it, then given back. */
  leasedAt: number;
  /** A key spent on within LEASE_MS is busy: its next request to the primary asks for a lease. */
  usedAt: number;
}

/**
 * One policy's budgets in a worker, counted by the primary through `counters`: a busy key's requests spend
 * the points leased to this worker, the others ask the primary.
 */
export class LeasedCounters implements SharedCounters {
  readonly #leases = new Map<string, Lease>();
  #sweeping: NodeJS.Timeout | null = null;

  constructor(
    private readonly counters: () => ClusterCounters,
    private readonly policy: string,
    private readonly windowMs: number,
    private readonly leaseMs = LEASE_MS,
  ) {}

  consume(key: string, weight: number, budget: number): SharedSpent | Promise<SharedSpent> {
    const now = Date.now();
    // A budget too small to share is never leased: nothing to hold for its keys.
    const leasable = budget >= LEASE_SHARE;
    const lease = leasable ? this.#leases.get(key) : undefined;
    if (lease !== undefined) {
      if (lease.left >= weight && now < lease.endsAt && now - lease.leasedAt < this.leaseMs) {
        lease.left -= weight;
        lease.usedAt = now;
        return { consumedPoints: lease.points - lease.left, msBeforeNext: lease.endsAt - now };
      }
      this.#giveBack(key, lease, now);
    }
    const busy = lease !== undefined && now - lease.usedAt < this.leaseMs;
    return this.counters()
      .ask(['take', this.policy, this.windowMs, key, weight, budget, busy ? LEASE_POINTS : 0])
      .then(([points, endsAt, leased]) => {
        const answeredAt = Date.now();
        if (leasable) this.#hold(key, points, endsAt, leased, answeredAt);
        return { consumedPoints: points - leased, msBeforeNext: endsAt - answeredAt };
      });
  }

  reward(key: string, weight: number): Promise<{ consumedPoints: number }> {
    const lease = this.#leases.get(key);
    if (lease !== undefined && lease.left > 0 && Date.now() < lease.endsAt) {
      // Not spent after all: back into the lease, which goes back to the primary with the rest.
      lease.left += weight;
      return Promise.resolve({ consumedPoints: lease.points - lease.left });
    }
    return this.counters()
      .ask(['give', this.policy, this.windowMs, key, weight, 0])
      .then(([points]) => ({ consumedPoints: points }));
  }

  delete(key: string): Promise<unknown> {
    // The primary forgets the whole window, leased points included.
    this.#leases.delete(key);
    return this.counters().ask(['forget', this.policy, this.windowMs, key]);
  }

  /** Keys this worker holds a lease or a recent request of (tests). */
  get size(): number {
    return this.#leases.size;
  }

  #hold(key: string, points: number, endsAt: number, leased: number, now: number): void {
    let lease = this.#leases.get(key);
    if (lease === undefined) {
      lease = { left: 0, points, endsAt, leasedAt: now, usedAt: now };
      this.#leases.set(key, lease);
      this.#sweep();
    } else if (lease.endsAt !== endsAt) {
      // A new window: what was left of the last one's lease is not this one's.
      this.#giveBack(key, lease, now);
      lease.points = points;
      lease.endsAt = endsAt;
    } else {
      // Several requests of one turn asked together: the latest count, and every lease they brought.
      lease.points = Math.max(lease.points, points);
    }
    lease.usedAt = now;
    if (leased > 0) {
      lease.left += leased;
      lease.leasedAt = now;
    }
  }

  /** What is left of a lease goes back to the window it was taken from, with the turn's other operations. */
  #giveBack(key: string, lease: Lease, now: number): void {
    if (lease.left > 0 && now < lease.endsAt) {
      this.counters()
        .ask(['give', this.policy, this.windowMs, key, lease.left, lease.endsAt])
        .catch(() => {}); // the primary gone: its counts went with it
    }
    lease.left = 0;
  }

  /** Every LEASE_MS while keys are held: expired leases go back, keys not spent on since are dropped. */
  #sweep(): void {
    if (this.#sweeping !== null) return;
    this.#sweeping = setTimeout(() => {
      this.#sweeping = null;
      const now = Date.now();
      for (const [key, lease] of this.#leases) {
        if (now - lease.leasedAt >= this.leaseMs) this.#giveBack(key, lease, now);
        if (now - lease.usedAt >= this.leaseMs) this.#leases.delete(key);
      }
      if (this.#leases.size > 0) this.#sweep();
    }, this.leaseMs);
    this.#sweeping.unref();
  }
}

/** Budgets counted through `counters`: what the rate-limit policies call, as operations for the primary. */
export function countedBy(counters: () => ClusterCounters, leaseMs = LEASE_MS): LimiterStore {
  return (options) => new LeasedCounters(counters, options.keyPrefix, options.duration * 1000, leaseMs);
}

let processCounters: ClusterCounters | null = null;

/**
 * In a worker: budgets counted by the primary (WORKERS > 1 without Redis), every budget of a turn in one
 * round trip (one ClusterCounters per process, on its IPC channel).
 */
export const clusterStore: LimiterStore = countedBy(() => (processCounters ??= new ClusterCounters()));
