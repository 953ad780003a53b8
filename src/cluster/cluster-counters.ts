import type { Cluster } from 'node:cluster';
import { WindowCounters, type LimiterStore } from '../limits/rate-limit.js';

/**
 * The rate-limit counters of one instance's workers (WORKERS > 1 without Redis), kept in the primary. A
 * worker asks for every count of one event-loop turn in one message up node:cluster's IPC channel — the
 * budgets of all the requests that turn admitted — and the primary answers them in one message: a request
 * costs a share of one round trip instead of a round trip per budget. The primary counts with the same
 * fixed windows a single process does (WindowCounters), so the workers draw on one budget per key.
 */

/** take: spend `weight` points; give: hand them back; forget: drop the key's window. */
export type CounterOperation = [kind: 'take' | 'give' | 'forget', policy: string, windowMs: number, key: string, weight: number];

/** What the key has spent in its window after the operation, and the milliseconds left of that window. */
export type CounterAnswer = [points: number, msLeft: number];

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

function isOperation(value: unknown): value is CounterOperation {
  if (!Array.isArray(value) || value.length !== 5) return false;
  const [kind, policy, windowMs, key, weight] = value as unknown[];
  return (
    (kind === 'take' || kind === 'give' || kind === 'forget') &&
    typeof policy === 'string' &&
    typeof windowMs === 'number' &&
    windowMs > 0 &&
    typeof key === 'string' &&
    typeof weight === 'number' &&
    Number.isFinite(weight)
  );
}

/** The primary's counters, by policy: each operation of a request, in order, and its answer. */
export class PrimaryCounters {
  readonly #policies = new Map<string, WindowCounters>();

  answer(operations: readonly unknown[], now = Date.now()): CounterAnswer[] {
    return operations.map((operation) => {
      // Sent by this program's workers; anything else is answered as an empty window rather than thrown.
      if (!isOperation(operation)) return [0, 0];
      const [kind, policy, windowMs, key, weight] = operation;
      let counters = this.#policies.get(policy);
      if (!counters) this.#policies.set(policy, (counters = new WindowCounters(windowMs)));
      if (kind === 'take') {
        const spent = counters.take(key, weight, now);
        return [spent.points, spent.msLeft];
      }
      if (kind === 'give') return [counters.give(key, weight, now), 0];
      counters.delete(key);
      return [0, 0];
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

/** Budgets counted through `counters`: what the rate-limit policies call, as operations for the primary. */
export function countedBy(counters: () => ClusterCounters): LimiterStore {
  return (options) => {
    const windowMs = options.duration * 1000;
    const ask = (kind: CounterOperation[0], key: string, weight: number) => counters().ask([kind, options.keyPrefix, windowMs, key, weight]);
    return {
      consume: (key, weight) => ask('take', key, weight).then(([points, msLeft]) => ({ consumedPoints: points, msBeforeNext: msLeft })),
      reward: (key, weight) => ask('give', key, weight).then(([points]) => ({ consumedPoints: points })),
      delete: (key) => ask('forget', key, 0),
    };
  };
}

let processCounters: ClusterCounters | null = null;

/**
 * In a worker: budgets counted by the primary (WORKERS > 1 without Redis), every budget of a turn in one
 * round trip (one ClusterCounters per process, on its IPC channel).
 */
export const clusterStore: LimiterStore = countedBy(() => (processCounters ??= new ClusterCounters()));
