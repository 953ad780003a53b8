import type { VerifiedToken } from './verified-token.js';

/**
 * A bounded LRU of verified tokens, keyed by the token string. A hit costs no signature check and no
 * database read; an entry is dropped at the token's expiry. Revocation and deactivation evict entries
 * explicitly, and `generation` lets a verification that raced with an eviction skip caching its result.
 *
 * One jti may be held under several strings: an ECDSA signature (r, s) verifies as (r, n - s) too, so the
 * same token has two valid encodings (more, with padding-free base64url variants a verifier accepts).
 * Revoking a jti evicts every string verified for it.
 */
export class VerifiedTokenCache {
  readonly #capacity: number;
  readonly #clock: () => number;
  readonly #entries = new Map<string, VerifiedToken>();
  readonly #byJti = new Map<string, string[]>();
  #generation = 0;

  constructor(capacity: number, clock: () => number) {
    this.#capacity = capacity;
    this.#clock = clock;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Bumped by every eviction; compare before and after a verification. */
  get generation(): number {
    return this.#generation;
  }

  get(token: string): VerifiedToken | null {
    const entry = this.#entries.get(token);
    if (!entry) return null;
    if (this.#clock() >= entry.expiresAt * 1000) {
      this.#delete(token, entry);
      return null;
    }
    // Map iteration order is insertion order: re-inserting makes this the most recently used entry.
    this.#entries.delete(token);
    this.#entries.set(token, entry);
    return entry;
  }

  /** Whether the token is cached and unexpired, without counting as a use (the LRU order is left as it is). */
  has(token: string): boolean {
    const entry = this.#entries.get(token);
    return entry !== undefined && this.#clock() < entry.expiresAt * 1000;
  }

  set(token: string, verified: VerifiedToken): void {
    if (this.#capacity <= 0) return;
    this.#entries.delete(token);
    this.#entries.set(token, verified);
    const strings = this.#byJti.get(verified.jti);
    if (!strings) this.#byJti.set(verified.jti, [token]);
    else if (!strings.includes(token)) strings.push(token);
    while (this.#entries.size > this.#capacity) {
      const oldest = this.#entries.entries().next().value;
      if (!oldest) break;
      this.#delete(oldest[0], oldest[1]);
    }
  }

  evictJti(jti: string): void {
    this.#generation++;
    for (const token of this.#byJti.get(jti) ?? []) this.#entries.delete(token);
    this.#byJti.delete(jti);
  }

  /** Drops every entry the predicate selects; returns how many. */
  evictWhere(predicate: (token: VerifiedToken) => boolean): number {
    this.#generation++;
    let evicted = 0;
    for (const [token, entry] of this.#entries) {
      if (predicate(entry)) {
        this.#delete(token, entry);
        evicted++;
      }
    }
    return evicted;
  }

  #delete(token: string, entry: VerifiedToken): void {
    this.#entries.delete(token);
    const strings = this.#byJti.get(entry.jti);
    if (!strings) return;
    const remaining = strings.filter((other) => other !== token);
    if (remaining.length === 0) this.#byJti.delete(entry.jti);
    else this.#byJti.set(entry.jti, remaining);
  }
}
