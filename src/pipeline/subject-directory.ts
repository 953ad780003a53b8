import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.js';

export interface SubjectStatus {
  /** The user's id, or the client's registration id. */
  id: string;
  /** Null for a client without client_credentials: it acts only for users, never on its own behalf. */
  role: string | null;
  active: boolean;
  /** A client's: the scopes it may hold now (a token's scopes are narrowed to these). Null for users. */
  scopes: ReadonlySet<string> | null;
  /** A client's: how many times its tokens were revoked (a self-contained token must carry this count). Null for users. */
  revocations: number | null;
  /** A client's own request budget per rate-limit window; null: the server's (and always null for users). */
  rateLimit: number | null;
}

/**
 * Role and status of token subjects (users by id, clients by client_id), cached so that a hot token costs
 * no database read. `forget` is called the moment a user or client changes, through this process or, via
 * the invalidation feed, any other (the CLI, another instance). Entries are also re-read every `ttlMs`, for
 * a change made in the database by hand.
 */
interface Entry {
  status: SubjectStatus | null;
  /** When the row was read: a lookup for a token issued later may ask for a newer read. */
  readAt: number;
  expiresAt: number;
}

export class SubjectDirectory {
  // One map per kind, keyed by the subject string the verified token holds: no key is built per request.
  readonly #entries = { user: new Map<string, Entry>(), client: new Map<string, Entry>() };
  /** Bumped by `forget`: a lookup that read the row before a change must not cache what it read. */
  #generation = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly options: { maxEntries?: number; ttlMs?: number; clock?: () => number } = {},
  ) {}

  /** The cached status (null: no such subject), or undefined when it has to be read (`lookup`). */
  cached(kind: 'user' | 'client', subject: string): SubjectStatus | null | undefined {
    const cached = this.#entries[kind].get(subject);
    return cached !== undefined && cached.expiresAt > (this.options.clock ?? Date.now)() ? cached.status : undefined;
  }

  /** `readSince` (epoch ms): a cached status read before then is read again (a token proves it may be stale). */
  async lookup(kind: 'user' | 'client', subject: string, readSince = 0): Promise<SubjectStatus | null> {
    const entries = this.#entries[kind];
    const now = (this.options.clock ?? Date.now)();
    const cached = entries.get(subject);
    if (cached !== undefined && cached.expiresAt > now && cached.readAt >= readSince) return cached.status;
    const generation = this.#generation;
    const status = kind === 'user' ? await this.#loadUser(subject) : await this.#loadClient(subject);
    if (generation !== this.#generation) return status;
    entries.delete(subject);
    if (entries.size >= (this.options.maxEntries ?? 10_000)) entries.delete(entries.keys().next().value!);
    entries.set(subject, { status, readAt: now, expiresAt: now + (this.options.ttlMs ?? 5000) });
    return status;
  }

  forget(subject: string): void {
    this.#generation++;
    this.#entries.user.delete(subject);
    this.#entries.client.delete(subject);
  }

  clear(): void {
    this.#generation++;
    this.#entries.user.clear();
    this.#entries.client.clear();
  }

  async #loadUser(id: string): Promise<SubjectStatus | null> {
    const row = await this.db.selectFrom('users').select(['role', 'active']).where('id', '=', id).executeTakeFirst();
    return row ? { id, role: row.role, active: Boolean(row.active), scopes: null, revocations: null, rateLimit: null } : null;
  }

  async #loadClient(clientId: string): Promise<SubjectStatus | null> {
    const row = await this.db.selectFrom('clients').select(['id', 'role', 'scopes', 'revocations', 'rateLimit']).where('clientId', '=', clientId).executeTakeFirst();
    // A client without a role is still the registration its users' tokens were issued to (authenticate.ts
    // refuses only tokens naming it as their own subject).
    return row ? { id: row.id, role: row.role, active: true, scopes: new Set(JSON.parse(row.scopes) as string[]), revocations: row.revocations, rateLimit: row.rateLimit } : null;
  }
}
