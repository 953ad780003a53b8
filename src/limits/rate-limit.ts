import type { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

/**
 * Request budgets per key (an address, a client, a user), reported with the IETF RateLimit header fields
 * (draft-ietf-httpapi-ratelimit-headers). Counting is rate-limiter-flexible's: a request may weigh more
 * than one point, and where the counters live is the store's choice (below), not the callers'.
 */
export interface RateLimitResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
  policyName: string;
  windowSeconds: number;
  /** The `RateLimit-Policy` field value: `"<name>";q=<limit>;w=<window>`. */
  policyField: string;
}

export interface StoreOptions {
  keyPrefix: string;
  points: number;
  /** Seconds. */
  duration: number;
}

/**
 * Where a budget's counters live: in this process (counted synchronously, so a request that waits for
 * nothing else is not charged a promise), or in a store every process shares.
 */
export type LimiterStore = 'in-process' | ((options: StoreOptions) => SharedCounters);

/** What a shared store answers for a key: what its window has spent, and how long that window has left. */
export interface SharedSpent {
  consumedPoints: number;
  msBeforeNext: number;
}

/** A store every process shares: the calls of rate-limiter-flexible's stores the policies make. */
export interface SharedCounters {
  /**
   * Spends `points` of the key's window, whose budget is `budget`; answers what the window has spent and how
   * long it has left — at once when the store can tell without asking anyone (a lease of the budget).
   */
  consume(key: string, points: number, budget: number): SharedSpent | Promise<SharedSpent>;
  /** Gives back `points`; answers what the window has spent after it. */
  reward(key: string, points: number): Promise<{ consumedPoints: number }>;
  delete(key: string): Promise<unknown>;
}

/** In this process: one server on its own. */
export const inProcessStore: LimiterStore = 'in-process';

/** In Redis (REDIS_URL): every instance and worker draws on the same counters. */
export function redisStore(redis: Redis, namespace = 'portcullis'): LimiterStore {
  // Not ready (Redis down or reconnecting): refused at once, so the policy counts in this process instead
  // of every request waiting for a timeout.
  return (options) => {
    const limiter = new RateLimiterRedis({ ...options, keyPrefix: `${namespace}:rate:${options.keyPrefix}`, storeClient: redis, rejectIfRedisNotReady: true });
    return { consume: (key, points) => limiter.consume(key, points), reward: (key, points) => limiter.reward(key, points), delete: (key) => limiter.delete(key) };
  };
}

/** What a key has spent in its window, and when that window ends. */
interface Spent {
  points: number;
  msLeft: number;
}

/**
 * Fixed windows counted in this process, synchronously. A key's window opens with its first point and
 * lasts `windowMs`; windows that ended are swept once per window, so the map holds at most the keys seen
 * in the last two windows.
 */
export class WindowCounters {
  readonly #windows = new Map<string, { points: number; endsAt: number }>();
  #sweepAt: number;

  constructor(readonly windowMs: number) {
    this.#sweepAt = Date.now() + windowMs;
  }

  take(key: string, weight: number, now = Date.now()): Spent {
    if (now >= this.#sweepAt) this.#sweep(now);
    let window = this.#windows.get(key);
    if (window === undefined || window.endsAt <= now) {
      window = { points: 0, endsAt: now + this.windowMs };
      this.#windows.set(key, window);
    }
    window.points += weight;
    return { points: window.points, msLeft: window.endsAt - now };
  }

  /**
   * Gives back points of the key's current window (none once it has ended; with `endsAt`, only to the window
   * that ends then), never below zero; answers what the window has spent after it.
   */
  give(key: string, weight: number, now = Date.now(), endsAt: number | null = null): number {
    const window = this.#windows.get(key);
    if (window === undefined || window.endsAt <= now) return 0;
    // Points of a window that has ended are not given to the one that followed it.
    if (endsAt !== null && window.endsAt !== endsAt) return window.points;
    window.points = Math.max(0, window.points - weight);
    return window.points;
  }

  delete(key: string): void {
    this.#windows.delete(key);
  }

  /** Keys with a window open or not yet swept (tests). */
  get size(): number {
    return this.#windows.size;
  }

  #sweep(now: number): void {
    for (const [key, window] of this.#windows) if (window.endsAt <= now) this.#windows.delete(key);
    this.#sweepAt = now + this.windowMs;
  }
}

/** What a shared store counts up to: it only counts, and each request is judged here against its budget. */
const COUNT_ONLY = 2 ** 31 - 1;

/**
 * One named budget: `points` per `windowSeconds` for each key. The store counts what each key spent in its
 * window, and the budget is judged here, so one counter serves keys with budgets of their own (a client
 * registered with its own `rateLimit`). When a shared store fails (Redis unreachable, the primary not
 * answering), the policy counts in this process instead until the store answers again: limits stay
 * enforced, per process, and no request fails because of the counters.
 */
export class RateLimitPolicy {
  /** In-process counters: the store itself, or the fallback of a shared store. */
  readonly #local: WindowCounters;
  readonly #shared: SharedCounters | null;
  /** The RateLimit-Policy field of the policy's own budget, written once. */
  readonly #policyField: string;

  constructor(
    readonly name: string,
    readonly points: number,
    readonly windowSeconds: number,
    /** Told of each request this budget refuses (metrics). */
    private readonly onRefused?: (policy: string) => void,
    store: LimiterStore = inProcessStore,
  ) {
    this.#local = new WindowCounters(windowSeconds * 1000);
    this.#policyField = policyField(name, points, windowSeconds);
    this.#shared = store === 'in-process' ? null : store({ keyPrefix: name, points: COUNT_ONLY, duration: windowSeconds });
  }

  /**
   * Takes `weight` points from the key's budget; `allowed` is false once the window's budget is spent (a
   * refused request counts too: retrying early does not help). `points`: the key's own budget, when it has
   * one, instead of the policy's. Answers at once when the counters are in this process, else a promise.
   */
  take(key: string, weight = 1, points: number | null = null): RateLimitResult | Promise<RateLimitResult> {
    const budget = points ?? this.points;
    if (this.#shared === null) return this.#judge(this.#local.take(key, weight), budget);
    const spent = this.#shared.consume(key, weight, budget);
    if (!(spent instanceof Promise)) return this.#judge({ points: spent.consumedPoints, msLeft: spent.msBeforeNext }, budget);
    return spent.then(
      (res) => this.#judge({ points: res.consumedPoints, msLeft: res.msBeforeNext }, budget),
      (failure: unknown) => {
        if (failure instanceof RateLimiterRes) throw failure;
        return this.#judge(this.#local.take(key, weight), budget);
      },
    );
  }

  /** `take`, always as a promise. */
  async consume(key: string, weight = 1, points: number | null = null): Promise<RateLimitResult> {
    return this.take(key, weight, points);
  }

  /** Forgets the key's spending (a successful sign-in clears the account's failures). */
  async reset(key: string): Promise<void> {
    this.#local.delete(key);
    if (this.#shared !== null) await this.#shared.delete(key).catch((failure: unknown) => this.#unlessRefusal(failure));
  }

  /** Gives back `weight` points taken by `consume` (a reservation that turned out not to be spent). */
  async refund(key: string, weight = 1): Promise<void> {
    if (this.#shared === null) {
      this.#local.give(key, weight);
      return;
    }
    const shared = this.#shared;
    const res = await shared.reward(key, weight).catch((failure: unknown) => {
      this.#unlessRefusal(failure);
      this.#local.give(key, weight);
      return null;
    });
    // The window ended in between: the reward opened a new one below zero, which would be a free point.
    if (res !== null && res.consumedPoints < 0) await shared.delete(key);
  }

  /** A store failure is answered in this process; anything else fails as it is. */
  #unlessRefusal(failure: unknown): void {
    if (failure instanceof RateLimiterRes) throw failure;
  }

  #judge(spent: Spent, budget: number): RateLimitResult {
    const allowed = spent.points <= budget;
    if (!allowed) this.onRefused?.(this.name);
    return {
      allowed,
      limit: budget,
      remaining: Math.max(0, budget - spent.points),
      resetSeconds: Math.max(1, Math.ceil(spent.msLeft / 1000)),
      policyName: this.name,
      windowSeconds: this.windowSeconds,
      policyField: budget === this.points ? this.#policyField : policyField(this.name, budget, this.windowSeconds),
    };
  }
}

export interface RateLimitSettings {
  windowSeconds: number;
  /** Per client, unless its registration sets its own. */
  max: number;
  /** Per user (a user's token draws on this budget and on its client's). */
  userMax: number;
  /** Per address, for anonymous callers and refused credentials. */
  anonymousMax: number;
  /** Per address, for every request that is not carrying an already-verified token. */
  addressMax: number;
}

/** The server's budgets, by who spends them. */
export class RateLimiter {
  /** Checked before any token is verified, so a flood of forged tokens costs no signature checks. */
  readonly address: RateLimitPolicy;
  readonly anonymous: RateLimitPolicy;
  readonly client: RateLimitPolicy;
  readonly user: RateLimitPolicy;
  /** The authorization server's endpoints, per address, before any credential is checked. */
  readonly oauth: RateLimitPolicy;

  constructor(settings: RateLimitSettings, onRefused?: (policy: string) => void, store: LimiterStore = inProcessStore) {
    const { windowSeconds } = settings;
    this.address = new RateLimitPolicy('address', settings.addressMax, windowSeconds, onRefused, store);
    this.anonymous = new RateLimitPolicy('anonymous', settings.anonymousMax, windowSeconds, onRefused, store);
    this.client = new RateLimitPolicy('client', settings.max, windowSeconds, onRefused, store);
    this.user = new RateLimitPolicy('user', settings.userMax, windowSeconds, onRefused, store);
    this.oauth = new RateLimitPolicy('oauth', settings.anonymousMax, windowSeconds, onRefused, store);
  }
}

function policyField(name: string, limit: number, windowSeconds: number): string {
  return `"${name}";q=${limit};w=${windowSeconds}`;
}

export function rateLimitHeaders(result: RateLimitResult): Record<string, string> {
  return { 'ratelimit-policy': result.policyField, ratelimit: rateLimitField(result) };
}

/** The RateLimit field: the budget's name, what is left of it and the seconds until its window ends. */
export function rateLimitField(result: RateLimitResult): string {
  return `"${result.policyName}";r=${result.remaining};t=${result.resetSeconds}`;
}
