import type { Redis } from 'ioredis';
import { RateLimiterCluster, RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

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
}

interface StoreOptions {
  keyPrefix: string;
  points: number;
  /** Seconds. */
  duration: number;
}

/** Where a budget's counters live. */
export type LimiterStore = (options: StoreOptions) => RateLimiterAbstract;

/** In this process: one server on its own. */
export const inProcessStore: LimiterStore = (options) => new RateLimiterMemory(options);

/** In Redis (REDIS_URL): every instance and worker draws on the same counters. */
export function redisStore(redis: Redis, namespace = 'portcullis'): LimiterStore {
  // Not ready (Redis down or reconnecting): refused at once, so the policy counts in this process instead
  // of every request waiting for a timeout.
  return (options) => new RateLimiterRedis({ ...options, keyPrefix: `${namespace}:rate:${options.keyPrefix}`, storeClient: redis, rejectIfRedisNotReady: true });
}

/** In the cluster's primary process (WORKERS > 1 without Redis), asked over node:cluster's IPC channel. */
export const clusterStore: LimiterStore = (options) => new RateLimiterCluster({ ...options, timeoutMs: 1000 });

/** What a store counts up to: the stores only count, and each request is judged here against its budget. */
const COUNT_ONLY = 2 ** 31 - 1;

/**
 * One named budget: `points` per `windowSeconds` for each key. The store counts what each key spent in its
 * window, and the budget is judged here, so one counter serves keys with budgets of their own (a client
 * registered with its own `rateLimit`). When the store fails (Redis unreachable, the primary not
 * answering), the policy counts in this process instead until the store answers again: limits stay
 * enforced, per process, and no request fails because of the counters.
 */
export class RateLimitPolicy {
  readonly #limiter: RateLimiterAbstract;
  readonly #fallback: RateLimiterAbstract;

  constructor(
    readonly name: string,
    readonly points: number,
    readonly windowSeconds: number,
    /** Told of each request this budget refuses (metrics). */
    private readonly onRefused?: (policy: string) => void,
    store: LimiterStore = inProcessStore,
  ) {
    const options = { keyPrefix: name, points: COUNT_ONLY, duration: windowSeconds };
    this.#limiter = store(options);
    this.#fallback = store === inProcessStore ? this.#limiter : new RateLimiterMemory(options);
  }

  /**
   * Takes `weight` points from the key's budget; `allowed` is false once the window's budget is spent (a
   * refused request counts too: retrying early does not help). `points`: the key's own budget, when it has
   * one, instead of the policy's.
   */
  async consume(key: string, weight = 1, points: number | null = null): Promise<RateLimitResult> {
    const budget = points ?? this.points;
    const res = await this.#limiter.consume(key, weight).catch((failure: unknown) => this.#orFallback(failure, () => this.#fallback.consume(key, weight)));
    const allowed = res.consumedPoints <= budget;
    if (!allowed) this.onRefused?.(this.name);
    return this.#result(res, allowed, budget);
  }

  /** Forgets the key's spending (a successful sign-in clears the account's failures). */
  async reset(key: string): Promise<void> {
    await this.#limiter.delete(key).catch((failure: unknown) => this.#orFallback(failure, () => this.#fallback.delete(key)));
  }

  /** Gives back `weight` points taken by `consume` (a reservation that turned out not to be spent). */
  async refund(key: string, weight = 1): Promise<void> {
    const limiter = await this.#limiter.reward(key, weight).then(
      (res) => ({ res, limiter: this.#limiter }),
      (failure: unknown) => this.#orFallback(failure, async () => ({ res: await this.#fallback.reward(key, weight), limiter: this.#fallback })),
    );
    // The window ended in between: the reward opened a new one below zero, which would be a free point.
    if (limiter.res.consumedPoints < 0) await limiter.limiter.delete(key);
  }

  /** A store failure is answered by the fallback store; in-process counting has none and fails as it is. */
  #orFallback<T>(failure: unknown, fallback: () => Promise<T>): Promise<T> {
    if (failure instanceof RateLimiterRes || this.#fallback === this.#limiter) throw failure;
    return fallback();
  }

  #result(res: RateLimiterRes, allowed: boolean, points: number): RateLimitResult {
    return {
      allowed,
      limit: points,
      remaining: Math.max(0, points - res.consumedPoints),
      resetSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
      policyName: this.name,
      windowSeconds: this.windowSeconds,
    };
  }
}

export interface RateLimitSettings {
  windowSeconds: number;
  /** Per client and per user. */
  max: number;
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
    this.user = new RateLimitPolicy('user', settings.max, windowSeconds, onRefused, store);
    this.oauth = new RateLimitPolicy('oauth', settings.anonymousMax, windowSeconds, onRefused, store);
  }
}

export function rateLimitHeaders(result: RateLimitResult): Record<string, string> {
  return {
    'ratelimit-policy': `"${result.policyName}";q=${result.limit};w=${result.windowSeconds}`,
    ratelimit: `"${result.policyName}";r=${result.remaining};t=${result.resetSeconds}`,
  };
}
