/**
 * Fixed-window request counters per key (client id, or IP for anonymous callers), reported with the
 * IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers).
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

export class RateLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly windowSeconds: number,
    private readonly clock: () => number = Date.now,
  ) {}

  hit(key: string, limit: number, policyName: string): RateLimitResult {
    const now = this.clock();
    const windowMs = this.windowSeconds * 1000;
    let entry = this.#windows.get(key);
    if (!entry || now - entry.start >= windowMs) {
      if (this.#windows.size > 100_000) this.#sweep(now, windowMs);
      entry = { start: now - (now % windowMs), count: 0 };
      this.#windows.set(key, entry);
    }
    entry.count++;
    const resetSeconds = Math.max(1, Math.ceil((entry.start + windowMs - now) / 1000));
    return {
      allowed: entry.count <= limit,
      limit,
      remaining: Math.max(0, limit - entry.count),
      resetSeconds,
      policyName,
      windowSeconds: this.windowSeconds,
    };
  }

  #sweep(now: number, windowMs: number): void {
    for (const [key, entry] of this.#windows) if (now - entry.start >= windowMs) this.#windows.delete(key);
  }
}

export function rateLimitHeaders(result: RateLimitResult): Record<string, string> {
  return {
    'ratelimit-policy': `"${result.policyName}";q=${result.limit};w=${result.windowSeconds}`,
    ratelimit: `"${result.policyName}";r=${result.remaining};t=${result.resetSeconds}`,
  };
}
