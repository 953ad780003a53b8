import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

/**
 * Request budgets per key (an address, a client, a user), reported with the IETF RateLimit header fields
 * (draft-ietf-httpapi-ratelimit-headers). Counting is rate-limiter-flexible's: a request may weigh more
 * than one point, and the in-memory store can be swapped for its Redis store without touching callers.
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

/** One named budget: `points` per `windowSeconds` for each key. */
export class RateLimitPolicy {
  readonly #limiter: RateLimiterAbstract;

  constructor(
    readonly name: string,
    readonly points: number,
    readonly windowSeconds: number,
    /** Told of each request this budget refuses (metrics). */
    private readonly onRefused?: (policy: string) => void,
  ) {
    this.#limiter = new RateLimiterMemory({ keyPrefix: name, points, duration: windowSeconds });
  }

  /** Takes `weight` points from the key's budget; `allowed` is false once the window's budget is spent. */
  async consume(key: string, weight = 1): Promise<RateLimitResult> {
    try {
      return this.#result(await this.#limiter.consume(key, weight), true);
    } catch (refusal) {
      // rate-limiter-flexible rejects with the counter's state when the budget is spent, and with an Error
      // only when its store fails.
      if (refusal instanceof RateLimiterRes) {
        this.onRefused?.(this.name);
        return this.#result(refusal, false);
      }
      throw refusal;
    }
  }

  /** Forgets the key's spending (a successful sign-in clears the account's failures). */
  async reset(key: string): Promise<void> {
    await this.#limiter.delete(key);
  }

  /** Gives back `weight` points taken by `consume` (a reservation that turned out not to be spent). */
  async refund(key: string, weight = 1): Promise<void> {
    const res = await this.#limiter.reward(key, weight);
    // The window ended in between: the reward opened a new one below zero, which would be a free point.
    if (res.consumedPoints < 0) await this.#limiter.delete(key);
  }

  #result(res: RateLimiterRes, allowed: boolean): RateLimitResult {
    return {
      allowed,
      limit: this.points,
      remaining: Math.max(0, this.points - res.consumedPoints),
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

  constructor(settings: RateLimitSettings, onRefused?: (policy: string) => void) {
    const { windowSeconds } = settings;
    this.address = new RateLimitPolicy('address', settings.addressMax, windowSeconds, onRefused);
    this.anonymous = new RateLimitPolicy('anonymous', settings.anonymousMax, windowSeconds, onRefused);
    this.client = new RateLimitPolicy('client', settings.max, windowSeconds, onRefused);
    this.user = new RateLimitPolicy('user', settings.max, windowSeconds, onRefused);
    this.oauth = new RateLimitPolicy('oauth', settings.anonymousMax, windowSeconds, onRefused);
  }
}

export function rateLimitHeaders(result: RateLimitResult): Record<string, string> {
  return {
    'ratelimit-policy': `"${result.policyName}";q=${result.limit};w=${result.windowSeconds}`,
    ratelimit: `"${result.policyName}";r=${result.remaining};t=${result.resetSeconds}`,
  };
}
