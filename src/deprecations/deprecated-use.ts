import type { Kysely } from 'kysely';
import { addDeprecatedUses, type DeprecatedUseCount } from '../storage/deprecated-uses.js';
import { nowIso } from '../storage/ids.js';
import type { Database } from '../storage/schema.js';

/** How often the counts are added to the database. */
export const FLUSH_INTERVAL_MS = 1000;
/** Distinct (client, element) counts held between flushes; one more flushes at once. */
const MAX_PENDING = 10_000;

/**
 * Counts uses of deprecated REST operations and GraphQL fields per client, in memory, and adds them to
 * `deprecated_uses` every FLUSH_INTERVAL_MS and on close: the counts of every instance add up in the
 * database. A failed flush keeps its counts for the next one.
 */
export class DeprecatedUse {
  readonly #db: Kysely<Database>;
  readonly #onError: (error: unknown) => void;
  #pending = new Map<string, DeprecatedUseCount>();
  #flushing: Promise<void> = Promise.resolve();
  readonly #timer: NodeJS.Timeout;

  constructor(
    db: Kysely<Database>,
    onError: (error: unknown) => void,
    /** Told of each use as it is recorded (metrics). */
    private readonly observe?: (iface: 'rest' | 'graphql', name: string) => void,
  ) {
    this.#db = db;
    this.#onError = onError;
    this.#timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.#timer.unref();
  }

  /** One use of a deprecated element by a client (null: a request without a token). */
  record(clientId: string | null, iface: 'rest' | 'graphql', name: string): void {
    this.observe?.(iface, name);
    const key = `${clientId ?? ''}\u0000${iface}\u0000${name}`;
    const now = nowIso();
    const count = this.#pending.get(key);
    if (count) {
      count.uses++;
      count.lastUsedAt = now;
      return;
    }
    this.#pending.set(key, { clientId: clientId ?? '', interface: iface, name, uses: 1, firstUsedAt: now, lastUsedAt: now });
    if (this.#pending.size >= MAX_PENDING) void this.flush();
  }

  /** Adds what is counted to the database; resolves once it is there (or kept for the next flush). */
  flush(): Promise<void> {
    if (this.#pending.size === 0) return this.#flushing;
    const batch = this.#pending;
    this.#pending = new Map();
    this.#flushing = this.#flushing.then(async () => {
      try {
        await addDeprecatedUses(this.#db, [...batch.values()]);
      } catch (error) {
        this.#onError(error);
        for (const [key, count] of batch) this.#merge(key, count);
      }
    });
    return this.#flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }

  #merge(key: string, count: DeprecatedUseCount): void {
    const newer = this.#pending.get(key);
    if (!newer) this.#pending.set(key, count);
    else {
      newer.uses += count.uses;
      newer.firstUsedAt = count.firstUsedAt;
    }
  }
}
