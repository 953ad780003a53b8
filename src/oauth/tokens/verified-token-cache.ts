import type { VerifiedToken } from './verified-token.js';

/** A cached token: the string it was verified as, its record, and whether it was used since the eviction scan last passed it. */
interface Slot {
  raw: string;
  token: VerifiedToken;
  used: boolean;
}

/**
 * How many trailing characters of a token key the map. A JWT is several hundred characters and a map hashes
 * the whole key, so a hot JWT would cost more per lookup than a short opaque token; the tail of either (a
 * JWT's signature, an opaque token's random part) tells tokens apart, and a hit is confirmed by comparing
 * the whole string.
 */
const KEY_LENGTH = 32;

function keyOf(token: string): string {
  return token.length <= KEY_LENGTH ? token : token.slice(-KEY_LENGTH);
}

/**
 * A bounded cache of verified tokens, evicting the least recently used in the CLOCK manner: a hit only
 * marks its entry used (no reordering on the request path), and when the cache is over capacity the oldest
 * entries that were used since are given a second chance at the back, the first unused one goes. A hit
 * costs no signature check and no database read; an entry is dropped at the token's expiry. Revocation and
 * deactivation evict entries explicitly, and `generation` lets a verification that raced with an eviction
 * skip caching its result. Two tokens that share a tail (never by chance; a forger cannot know a victim's
 * tail) only take each other's place: a lookup answers only for the exact string that was verified.
 *
 * One jti may be held under several strings: an ECDSA signature (r, s) verifies as (r, n - s) too, so the
 * same token has two valid encodings (more, with padding-free base64url variants a verifier accepts).
 * Revoking a jti evicts every string verified for it.
 */
export class VerifiedTokenCache {
  readonly #capacity: number;
  readonly #clock: () => number;
  /** By the token's tail (keyOf). */
  readonly #entries = new Map<string, Slot>();
  /** The strings verified for each jti. */
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
    const slot = this.#entries.get(keyOf(token));
    if (slot === undefined || slot.raw !== token) return null;
    if (this.#clock() >= slot.token.expiresAt * 1000) {
      this.#delete(slot);
      return null;
    }
    slot.used = true;
    return slot.token;
  }

  /** Whether the token is cached and unexpired, without counting as a use. */
  has(token: string): boolean {
    const slot = this.#entries.get(keyOf(token));
    return slot !== undefined && slot.raw === token && this.#clock() < slot.token.expiresAt * 1000;
  }

  set(token: string, verified: VerifiedToken): void {
    if (this.#capacity <= 0) return;
    const key = keyOf(token);
    const previous = this.#entries.get(key);
    if (previous !== undefined) this.#delete(previous);
    this.#entries.set(key, { raw: token, token: verified, used: false });
    const strings = this.#byJti.get(verified.jti);
    if (!strings) this.#byJti.set(verified.jti, [token]);
    else if (!strings.includes(token)) strings.push(token);
    // Map iteration order is insertion order, so the first entry is the oldest. Each turn either evicts or
    // clears a mark, so this ends within two passes over the cache.
    while (this.#entries.size > this.#capacity) {
      const [oldestKey, oldest] = this.#entries.entries().next().value!;
      if (oldest.used || oldestKey === key) {
        // Used since the last pass (or the entry just added): to the back, unmarked.
        oldest.used = false;
        this.#entries.delete(oldestKey);
        this.#entries.set(oldestKey, oldest);
      } else {
        this.#delete(oldest);
      }
    }
  }

  evictJti(jti: string): void {
    this.#generation++;
    for (const token of this.#byJti.get(jti) ?? []) {
      const key = keyOf(token);
      if (this.#entries.get(key)?.raw === token) this.#entries.delete(key);
    }
    this.#byJti.delete(jti);
  }

  /** Drops every entry the predicate selects; returns how many. */
  evictWhere(predicate: (token: VerifiedToken) => boolean): number {
    this.#generation++;
    let evicted = 0;
    for (const slot of [...this.#entries.values()]) {
      if (predicate(slot.token)) {
        this.#delete(slot);
        evicted++;
      }
    }
    return evicted;
  }

  #delete(slot: Slot): void {
    const key = keyOf(slot.raw);
    if (this.#entries.get(key) === slot) this.#entries.delete(key);
    const strings = this.#byJti.get(slot.token.jti);
    if (!strings) return;
    const remaining = strings.filter((other) => other !== slot.raw);
    if (remaining.length === 0) this.#byJti.delete(slot.token.jti);
    else this.#byJti.set(slot.token.jti, remaining);
  }
}
