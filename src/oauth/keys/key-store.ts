import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import { KeyObject } from 'node:crypto';
import type { Config } from '../../config/config.js';
import type { Db } from '../../storage/dialect.js';
import type { SigningKeysTable } from '../../storage/schema.js';
import { isUniqueViolation } from '../../storage/unique-violation.js';
import { writeTransaction } from '../../storage/write-transaction.js';
import { MAX_ACCESS_TOKEN_TTL } from '../tokens/lifetime.js';
import { decryptStoredJwk, encryptionKeysFrom, encryptPrivateJwk, type KeyEncryptionKeys } from './key-encryption.js';

/** RFC 9068 §2.1 recommends ES256-class asymmetric signatures: access tokens are signed with ES256 only. */
export const SIGNING_ALG = 'ES256';

/**
 * The algorithms keys exist for: ES256 for access tokens (and ID tokens of clients that register it), RS256
 * for ID tokens, since OpenID Connect Core §15.1 requires every provider to support it.
 */
export type SigningAlg = 'ES256' | 'RS256';
const ALGS: readonly SigningAlg[] = ['ES256', 'RS256'];

/** Every process re-reads the keys at least this often for signing and for the JWKS. */
export const KEY_REFRESH_MS = 60_000;
/** A token with an unknown kid triggers at most one database read per this interval (no amplification). */
const UNKNOWN_KID_RELOAD_MS = 10_000;
/** How long a client may keep a copy of the JWKS (its `Cache-Control: max-age`). */
export const JWKS_MAX_AGE_SECONDS = 300;
/**
 * A rotation publishes the new keys this long before they sign: longer than a client keeps the JWKS
 * (JWKS_MAX_AGE_SECONDS), plus the time another server process takes to re-read the keys (KEY_REFRESH_MS),
 * plus the largest clock difference TOKEN_CLOCK_SKEW allows (300 s) between the process that made the key
 * and one that signs with it. So a resource server's cached JWKS and every process's keys hold a new key
 * before the first token it signed can reach them.
 */
export const PUBLISH_AHEAD_SECONDS = 15 * 60;

export interface SigningKey {
  kid: string;
  alg: SigningAlg;
  /** For jose (ID tokens). */
  privateKey: CryptoKey;
  /** The same key for node:crypto's `sign` (access tokens), wrapped once when the key is loaded. */
  keyObject: KeyObject;
}

/** A published key: public members only (RFC 7517 §4; EC: RFC 7518 §6.2.1, RSA: §6.3.1). */
export type PublicJwk =
  | { kty: 'EC'; crv: string; x: string; y: string; kid: string; alg: SigningAlg; use: 'sig' }
  | { kty: 'RSA'; n: string; e: string; kid: string; alg: SigningAlg; use: 'sig' };

export interface JwksDocument {
  keys: PublicJwk[];
}

/** What a rotation made: the new access-token and ID-token keys, and when they start signing. */
export interface KeyRotation {
  kid: string;
  idTokenKid: string;
  activatesAt: string;
}

interface LoadedKey {
  kid: string;
  alg: SigningAlg;
  jwk: PublicJwk;
  publicKey: CryptoKey;
  generation: number;
  /** Milliseconds since the epoch. */
  activatesAt: number;
  retiredAt: number | null;
  encrypted: string;
}

/** The columns a rotation decides on, as read inside its transaction. */
type KeyTiming = Pick<SigningKeysTable, 'alg' | 'generation' | 'activatesAt' | 'retiredAt'>;

export interface KeyStoreOptions {
  /** Milliseconds since the epoch; tests move time. */
  clock?: () => number;
}

/**
 * Signing keys kept in the `signing_keys` table, private parts encrypted. Every key is published (JWKS)
 * from the moment it is made. Of each algorithm, the key that activated last and is not retired signs: a
 * rotation makes the next keys to sign PUBLISH_AHEAD_SECONDS from now and retires the current ones at that
 * same moment, so every process, reading the same rows, switches at the same time. A retired key stays
 * published and usable for verification until every token it may have signed has expired.
 */
export class KeyStore {
  readonly #db: Db;
  readonly #encryption: KeyEncryptionKeys;
  readonly #clock: () => number;
  /** How long a retired key stays published: the longest token lifetime (ID tokens expire with their access
   * token), plus a key refresh, plus the allowed clock skew. */
  readonly #retentionMs: number;
  /** SIGNING_KEY_ROTATION_DAYS; 0: no schedule. */
  readonly #rotationMs: number;
  /** Newest activation first. */
  #keys: LoadedKey[] = [];
  #byKid = new Map<string, LoadedKey>();
  readonly #signers = new Map<string, Promise<SigningKey>>();
  #loadedAt = Number.NEGATIVE_INFINITY;
  #loading: Promise<void> | null = null;

  private constructor(db: Db, config: Config, options: KeyStoreOptions) {
    this.#db = db;
    this.#encryption = encryptionKeysFrom(config);
    this.#clock = options.clock ?? Date.now;
    this.#retentionMs = (MAX_ACCESS_TOKEN_TTL + KEY_REFRESH_MS / 1000 + config.tokens.clockSkew) * 1000;
    this.#rotationMs = config.signingKeys.rotationDays * 86_400_000;
  }

  /**
   * Loads the keys, creating a key for each algorithm that has none that may sign: the ES256 and the RS256
   * key are made together, so that the JWKS lists the ID-token key before the first ID token is signed
   * (a client may fetch the JWKS once and cache it). The signing keys are decrypted here, so that a wrong
   * KEY_ENCRYPTION_SECRET stops the start.
   */
  static async open(db: Db, config: Config, options: KeyStoreOptions = {}): Promise<KeyStore> {
    const store = new KeyStore(db, config, options);
    await store.refresh();
    if (ALGS.some((alg) => !store.#activeKey(alg))) await store.#addMissingKeys();
    await Promise.all(ALGS.map((alg) => store.signingKey(alg)));
    return store;
  }

  async signingKey(alg: SigningAlg = SIGNING_ALG): Promise<SigningKey> {
    await this.#refreshIfOlderThan(KEY_REFRESH_MS);
    let key = this.#activeKey(alg);
    if (!key) {
      // Every start creates the keys that are missing; this covers a table another process emptied by hand.
      await this.#addMissingKeys();
      key = this.#activeKey(alg);
      if (!key) throw new Error(`no ${alg} signing key could be made`);
    }
    return this.#signer(key);
  }

  /** The public key for `kid` if it is published and made for `alg`, else null. */
  async verificationKey(kid: string, alg: SigningAlg = SIGNING_ALG): Promise<CryptoKey | null> {
    const known = this.#publishedKey(kid);
    if (known) return known.alg === alg ? known.publicKey : null;
    await this.#refreshIfOlderThan(UNKNOWN_KID_RELOAD_MS);
    const loaded = this.#publishedKey(kid);
    return loaded && loaded.alg === alg ? loaded.publicKey : null;
  }

  /** Keys about to sign first, then the signing ones, then retired ones still published. */
  async publicJwks(): Promise<JwksDocument> {
    await this.#refreshIfOlderThan(KEY_REFRESH_MS);
    const now = this.#clock();
    return { keys: this.#keys.filter((key) => this.#isPublished(key, now)).map((key) => ({ ...key.jwk })) };
  }

  /**
   * `keys rotate`: new access-token and ID-token keys, published now, sign from PUBLISH_AHEAD_SECONDS on;
   * the keys signing until then retire at that moment (and stay published for the retention period).
   * Keys retired longer ago than that are deleted.
   */
  async rotate(): Promise<KeyRotation> {
    // Another process may take the same generation number first (PostgreSQL); the next attempt reads it.
    for (let attempt = 1; ; attempt++) {
      const rotation = await this.#rotate(() => true);
      if (rotation) return rotation;
      if (attempt === 3) throw new Error('the signing keys kept changing while rotating them; try again');
    }
  }

  /**
   * The schedule (SIGNING_KEY_ROTATION_DAYS): rotates when the newest keys will have signed for that long
   * by the time new ones would activate, unless new ones are already waiting. Every server calls it; the
   * check is repeated in the rotation's transaction, and the unique generation number refuses a second
   * rotation made at the same moment, so one rotation happens. Returns it, or null. Re-reads the keys
   * in any case.
   */
  async rotateIfDue(): Promise<KeyRotation | null> {
    await this.refresh();
    if (this.#rotationMs === 0) return null;
    const due = (keys: readonly KeyTiming[], now: number) => rotationDue(keys, now, this.#rotationMs);
    if (!due(this.#keys.map(timingOf), this.#clock())) return null;
    return this.#rotate(due);
  }

  /** Re-reads every key from the database. */
  refresh(): Promise<void> {
    this.#loading ??= this.#load().finally(() => {
      this.#loading = null;
    });
    return this.#loading;
  }

  async #refreshIfOlderThan(ms: number): Promise<void> {
    if (this.#clock() - this.#loadedAt >= ms) await this.refresh();
  }

  async #load(): Promise<void> {
    const rows = await this.#db.kysely.selectFrom('signingKeys').selectAll().execute();
    const keys: LoadedKey[] = [];
    for (const row of rows) {
      const alg = readAlg(row);
      const previous = this.#byKid.get(row.kid);
      const jwk = previous?.jwk ?? toPublicJwk(JSON.parse(row.publicJwk) as JWK, row.kid, alg);
      const publicKey = previous?.publicKey ?? ((await importJWK(jwk, alg)) as CryptoKey);
      keys.push({
        kid: row.kid,
        alg,
        jwk,
        publicKey,
        generation: Number(row.generation),
        activatesAt: Date.parse(row.activatesAt),
        retiredAt: row.retiredAt === null ? null : Date.parse(row.retiredAt),
        encrypted: row.privateJwkEncrypted,
      });
    }
    // The generation and then the kid break ties, so that every process picks the same signer.
    keys.sort((a, b) => b.activatesAt - a.activatesAt || b.generation - a.generation || compareDescending(a.kid, b.kid));
    this.#keys = keys;
    this.#byKid = new Map(keys.map((key) => [key.kid, key]));
    for (const kid of this.#signers.keys()) if (!this.#byKid.has(kid)) this.#signers.delete(kid);
    this.#loadedAt = this.#clock();
  }

  /** The key of `alg` that signs now: the one activated last among those activated and not retired. */
  #activeKey(alg: SigningAlg): LoadedKey | undefined {
    const now = this.#clock();
    return this.#keys.find((key) => key.alg === alg && key.activatesAt <= now && (key.retiredAt === null || key.retiredAt > now));
  }

  /** Decrypted once per key, when it first signs. */
  #signer(key: LoadedKey): Promise<SigningKey> {
    let signer = this.#signers.get(key.kid);
    if (!signer) {
      signer = this.#importSigner(key);
      this.#signers.set(key.kid, signer);
      signer.catch(() => this.#signers.delete(key.kid));
    }
    return signer;
  }

  async #importSigner(key: LoadedKey): Promise<SigningKey> {
    const jwk = decryptStoredJwk(key.encrypted, key.kid, this.#encryption) as JWK;
    const privateKey = (await importJWK(jwk, key.alg, { extractable: false })) as CryptoKey;
    return { kid: key.kid, alg: key.alg, privateKey, keyObject: KeyObject.from(privateKey) };
  }

  /** A key, signing at once, for each algorithm that has none that may sign (first start). */
  async #addMissingKeys(): Promise<void> {
    const now = this.#clock();
    const iso = new Date(now).toISOString();
    const missing = ALGS.filter((alg) => !this.#activeKey(alg));
    const rows = await Promise.all(missing.map((alg) => this.#createKeyRow(alg, iso, iso)));
    try {
      await writeTransaction(this.#db.kysely, async (trx) => {
        const existing = await trx.selectFrom('signingKeys').select(['alg', 'generation', 'activatesAt', 'retiredAt']).execute();
        for (const row of rows) {
          const sameAlg = existing.filter((key) => key.alg === row.alg);
          // Another process made one meanwhile.
          if (sameAlg.some((key) => mayHaveSigned(key, now))) continue;
          await trx.insertInto('signingKeys').values({ ...row, generation: nextGeneration(sameAlg) }).execute();
        }
      });
    } catch (error) {
      // Two processes starting on an empty database at once (PostgreSQL): the other one's keys are there.
      if (!isUniqueViolation(error)) throw error;
    }
    await this.refresh();
  }

  /** One rotation if `isDue` holds for the keys as the transaction reads them; null if not (or lost a race). */
  async #rotate(isDue: (keys: readonly KeyTiming[], now: number) => boolean): Promise<KeyRotation | null> {
    const now = this.#clock();
    const created = new Date(now).toISOString();
    const activatesAt = new Date(now + PUBLISH_AHEAD_SECONDS * 1000).toISOString();
    // Made before the transaction: an RSA key takes a while, and SQLite's write lock is held throughout it.
    const rows = await Promise.all(ALGS.map((alg) => this.#createKeyRow(alg, created, activatesAt)));
    const pruneBefore = new Date(now - this.#retentionMs).toISOString();
    let rotated: boolean;
    try {
      rotated = await writeTransaction(this.#db.kysely, async (trx) => {
        const existing = await trx.selectFrom('signingKeys').select(['alg', 'generation', 'activatesAt', 'retiredAt']).execute();
        if (!isDue(existing, now)) return false;
        const generation = nextGeneration(existing);
        await trx.updateTable('signingKeys').set({ retiredAt: activatesAt }).where('retiredAt', 'is', null).execute();
        await trx.insertInto('signingKeys').values(rows.map((row) => ({ ...row, generation }))).execute();
        await trx.deleteFrom('signingKeys').where('retiredAt', '<=', pruneBefore).execute();
        return true;
      });
    } catch (error) {
      if (isUniqueViolation(error)) return null;
      throw error;
    }
    if (!rotated) return null;
    await this.refresh();
    const kidOf = (alg: SigningAlg) => rows.find((row) => row.alg === alg)!.kid;
    return { kid: kidOf('ES256'), idTokenKid: kidOf('RS256'), activatesAt };
  }

  async #createKeyRow(alg: SigningAlg, createdAt: string, activatesAt: string): Promise<Omit<SigningKeysTable, 'generation'>> {
    // RFC 7518 §3.3: an RSA key for RS256 has at least 2048 bits.
    const pair = await generateKeyPair(alg, { extractable: true, ...(alg === 'RS256' ? { modulusLength: 2048 } : {}) });
    const publicMembers = await exportJWK(pair.publicKey);
    // RFC 7638 thumbprint: a kid derived from the key itself, unique without coordination.
    const kid = await calculateJwkThumbprint(publicMembers);
    const privateJwk = await exportJWK(pair.privateKey);
    return {
      kid,
      alg,
      publicJwk: JSON.stringify(toPublicJwk(publicMembers, kid, alg)),
      privateJwkEncrypted: encryptPrivateJwk(privateJwk, kid, this.#encryption.current),
      createdAt,
      activatesAt,
      retiredAt: null,
    };
  }

  #publishedKey(kid: string): LoadedKey | null {
    const key = this.#byKid.get(kid);
    return key && this.#isPublished(key, this.#clock()) ? key : null;
  }

  #isPublished(key: LoadedKey, now: number): boolean {
    return key.retiredAt === null || now < key.retiredAt + this.#retentionMs;
  }
}

/**
 * Due when no new key is waiting and the newest one, by the time a new key made now would activate, will
 * have signed for the rotation period.
 */
export function rotationDue(keys: readonly KeyTiming[], now: number, rotationMs: number): boolean {
  if (keys.length === 0) return false;
  const newest = Math.max(...keys.map((key) => Date.parse(key.activatesAt)));
  if (newest > now) return false;
  return now + PUBLISH_AHEAD_SECONDS * 1000 >= newest + rotationMs;
}

function mayHaveSigned(key: KeyTiming, now: number): boolean {
  return Date.parse(key.activatesAt) <= now && (key.retiredAt === null || Date.parse(key.retiredAt) > now);
}

function nextGeneration(keys: readonly KeyTiming[]): number {
  return Math.max(0, ...keys.map((key) => Number(key.generation))) + 1;
}

function timingOf(key: LoadedKey): KeyTiming {
  return {
    alg: key.alg,
    generation: key.generation,
    activatesAt: new Date(key.activatesAt).toISOString(),
    retiredAt: key.retiredAt === null ? null : new Date(key.retiredAt).toISOString(),
  };
}

function compareDescending(a: string, b: string): number {
  return a < b ? 1 : a > b ? -1 : 0;
}

function readAlg(row: SigningKeysTable): SigningAlg {
  if (!(ALGS as readonly string[]).includes(row.alg)) throw new Error(`Signing key ${row.kid} has an unsupported alg ${row.alg}`);
  return row.alg as SigningAlg;
}

/** Copies only the public members, whatever the stored JSON holds. */
function toPublicJwk(jwk: JWK, kid: string, alg: SigningAlg): PublicJwk {
  if (alg === 'ES256') {
    const { kty, crv, x, y } = jwk;
    if (kty !== 'EC' || crv !== 'P-256' || typeof x !== 'string' || typeof y !== 'string') {
      throw new Error(`Signing key ${kid} is not a P-256 EC key`);
    }
    return { kty: 'EC', crv, x, y, kid, alg, use: 'sig' };
  }
  const { kty, n, e } = jwk;
  if (kty !== 'RSA' || typeof n !== 'string' || typeof e !== 'string') throw new Error(`Signing key ${kid} is not an RSA key`);
  return { kty: 'RSA', n, e, kid, alg, use: 'sig' };
}
