import type { Kysely } from 'kysely';
import { findClientByClientId, type ClientWithSecret } from '../storage/clients.js';
import type { Database } from '../storage/schema.js';

export interface RegisteredClientsOptions {
  /** Registrations held at most; the one read longest ago goes first. */
  maxEntries?: number;
  /** Each registration is read again after this long (default 5 s, as cached subjects), for a change made in the database by hand. */
  ttlMs?: number;
  clock?: () => number;
}

interface Entry {
  client: ClientWithSecret;
  expiresAt: number;
}

/**
 * Client registrations by client_id, held in memory so that authenticating a client at the token endpoint
 * costs no database read. What invalidates an entry, in every process: every change to `clients` — created,
 * replaced, deleted, its secret rotated, by the REST API or the CLI — records a `client` invalidation in the
 * same transaction, and the invalidation feed calls `forget` for it (the process that made the change calls
 * it at once); an unreadable feed calls `clear`. That is the bound token revocation has. Entries hold the
 * registration's id: a client_id deleted and registered again is a new entry (its creation is an
 * invalidation too), and tokens and grants remember the id they were issued to.
 *
 * Unknown client_ids are not held: anyone can send one, and each would take a place.
 */
export class RegisteredClients {
  readonly #db: Kysely<Database>;
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  readonly #clock: () => number;
  readonly #entries = new Map<string, Entry>();
  /** Reads of the same client_id that are under way share one query. */
  readonly #reading = new Map<string, Promise<ClientWithSecret | null>>();
  /** Bumped by `forget` and `clear`: a read that began before a change must not be kept. */
  #generation = 0;

  constructor(db: Kysely<Database>, options: RegisteredClientsOptions = {}) {
    this.#db = db;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#ttlMs = options.ttlMs ?? 5_000;
    this.#clock = options.clock ?? Date.now;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The registration (frozen, shared by every caller) or null when the client_id names none. */
  find(clientId: string): Promise<ClientWithSecret | null> {
    const entry = this.#entries.get(clientId);
    if (entry !== undefined && entry.expiresAt > this.#clock()) return Promise.resolve(entry.client);
    let reading = this.#reading.get(clientId);
    if (!reading) {
      reading = this.#read(clientId).finally(() => this.#reading.delete(clientId));
      this.#reading.set(clientId, reading);
    }
    return reading;
  }

  forget(clientId: string): void {
    this.#generation++;
    this.#entries.delete(clientId);
    // A read under way may have seen the row before the change; the next caller reads again.
    this.#reading.delete(clientId);
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
    this.#reading.clear();
  }

  async #read(clientId: string): Promise<ClientWithSecret | null> {
    const generation = this.#generation;
    const now = this.#clock();
    const found = await findClientByClientId(this.#db, clientId);
    if (found === null) {
      if (generation === this.#generation) this.#entries.delete(clientId);
      return null;
    }
    const client = freezeClient(found);
    if (generation === this.#generation) {
      this.#entries.delete(clientId);
      if (this.#entries.size >= this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
      this.#entries.set(clientId, { client, expiresAt: now + this.#ttlMs });
    }
    return client;
  }
}

function freezeClient(client: ClientWithSecret): ClientWithSecret {
  Object.freeze(client.redirectUris);
  Object.freeze(client.grantTypes);
  Object.freeze(client.scopes);
  Object.freeze(client.postLogoutRedirectUris);
  return Object.freeze(client);
}
