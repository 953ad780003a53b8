import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import { KeyObject } from 'node:crypto';
import type { Config } from '../../config/config.js';
import type { Db } from '../../storage/dialect.js';
import type { SigningKeysTable } from '../../storage/schema.js';
import { MAX_ACCESS_TOKEN_TTL } from '../tokens/lifetime.js';
import { decryptPrivateJwk, deriveEncryptionKey, encryptPrivateJwk } from './key-encryption.js';

/** RFC 9068 §2.1 recommends ES256-class asymmetric signatures: access tokens are signed with ES256 only. */
export const SIGNING_ALG = 'ES256';

/**
 * The algorithms keys exist for: ES256 for access tokens (and ID tokens of clients that register it), RS256
 * for ID tokens, since OpenID Connect Core §15.1 requires every provider to support it.
 */
export type SigningAlg = 'ES256' | 'RS256';
const ALGS: readonly SigningAlg[] = ['ES256', 'RS256'];

/** Another instance may rotate: keys are re-read at least this often for signing and for the JWKS. */
const REFRESH_MS = 60_000;
/** A token with an unknown kid triggers at most one database read per this interval (no amplification). */
const UNKNOWN_KID_RELOAD_MS = 10_000;

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

interface LoadedKey {
  jwk: PublicJwk;
  publicKey: CryptoKey;
  retiredAt: string | null;
}

export interface KeyStoreOptions {
  /** Milliseconds since the epoch; tests move time. */
  clock?: () => number;
}

/**
 * ES256 signing keys kept in the `signing_keys` table, private parts encrypted. The newest key that is not
 * retired signs; a retired key stays published (JWKS) and usable for verification until every token it
 * may have signed has expired.
 */
export class KeyStore {
  readonly #db: Db;
  readonly #encryptionKey: Buffer;
  readonly #clock: () => number;
  /** Seconds a retired key stays published: the longest token lifetime, plus how long another instance
   * may keep signing with it before it notices the rotation, plus the allowed clock skew. */
  readonly #retentionSeconds: number;
  #keys = new Map<string, LoadedKey>();
  readonly #signers = new Map<SigningAlg, SigningKey>();
  #loadedAt = Number.NEGATIVE_INFINITY;
  #loading: Promise<void> | null = null;

  private constructor(db: Db, config: Config, options: KeyStoreOptions) {
    this.#db = db;
    this.#encryptionKey = deriveEncryptionKey(config.keyEncryptionSecret);
    this.#clock = options.clock ?? Date.now;
    this.#retentionSeconds = MAX_ACCESS_TOKEN_TTL + REFRESH_MS / 1000 + config.tokens.clockSkew;
  }

  /**
   * Loads the keys, creating a key for each algorithm that has none that may sign: the ES256 and the RS256
   * key are made together, so that the JWKS lists the ID-token key before the first ID token is signed
   * (a client may fetch the JWKS once and cache it).
   */
  static async open(db: Db, config: Config, options: KeyStoreOptions = {}): Promise<KeyStore> {
    const store = new KeyStore(db, config, options);
    await store.refresh();
    const missing = ALGS.filter((alg) => !store.#signers.has(alg));
    if (missing.length > 0) {
      await Promise.all(missing.map((alg) => store.#insertKey(alg)));
      await store.refresh();
    }
    return store;
  }

  async signingKey(alg: SigningAlg = SIGNING_ALG): Promise<SigningKey> {
    await this.#refreshIfOlderThan(REFRESH_MS);
    // Every rotation and every start creates both keys; this covers a table another process emptied by hand.
    if (!this.#signers.has(alg)) {
      await this.#insertKey(alg);
      await this.refresh();
    }
    return this.#signers.get(alg)!;
  }

  /** The public key for `kid` if it is published and made for `alg`, else null. */
  async verificationKey(kid: string, alg: SigningAlg = SIGNING_ALG): Promise<CryptoKey | null> {
    const known = this.#publishedKey(kid);
    if (known) return known.jwk.alg === alg ? known.publicKey : null;
    await this.#refreshIfOlderThan(UNKNOWN_KID_RELOAD_MS);
    const loaded = this.#publishedKey(kid);
    return loaded && loaded.jwk.alg === alg ? loaded.publicKey : null;
  }

  async publicJwks(): Promise<JwksDocument> {
    await this.#refreshIfOlderThan(REFRESH_MS);
    const keys = [...this.#keys.values()].filter((key) => this.#isPublished(key)).map((key) => ({ ...key.jwk }));
    return { keys };
  }

  /**
   * A new access-token key and a new ID-token key take over signing; every key that was signing is retired
   * (stays published for the retention period) and keys retired longer ago than that are deleted. Returns
   * the new access-token kid.
   */
  async rotate(): Promise<string> {
    const now = new Date(this.#clock());
    const rows = await Promise.all(ALGS.map((alg) => this.#createKeyRow(alg, now.toISOString())));
    const pruneBefore = new Date(now.getTime() - this.#retentionSeconds * 1000).toISOString();
    await this.#db.kysely.transaction().execute(async (trx) => {
      await trx.updateTable('signingKeys').set({ retiredAt: now.toISOString() }).where('retiredAt', 'is', null).execute();
      await trx.insertInto('signingKeys').values(rows).execute();
      await trx.deleteFrom('signingKeys').where('retiredAt', '<=', pruneBefore).execute();
    });
    await this.refresh();
    return rows.find((row) => row.alg === SIGNING_ALG)!.kid;
  }

  /** Re-reads every key from the database (also what a rotation broadcast from another instance calls). */
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
    // Signing keys first, newest first; the kid breaks ties so that every instance picks the same signer.
    rows.sort(
      (a, b) =>
        Number(a.retiredAt !== null) - Number(b.retiredAt !== null) ||
        compareDescending(a.createdAt, b.createdAt) ||
        compareDescending(a.kid, b.kid),
    );
    const keys = new Map<string, LoadedKey>();
    const signers = new Map<SigningAlg, SigningKey>();
    for (const row of rows) {
      const alg = readAlg(row);
      const previous = this.#keys.get(row.kid);
      const jwk = previous?.jwk ?? toPublicJwk(JSON.parse(row.publicJwk) as JWK, row.kid, alg);
      const publicKey = previous?.publicKey ?? ((await importJWK(jwk, alg)) as CryptoKey);
      keys.set(row.kid, { jwk, publicKey, retiredAt: row.retiredAt });
      // The first unretired key of each algorithm signs (rows are sorted newest first).
      if (row.retiredAt === null && !signers.has(alg)) {
        const current = [...this.#signers.values()].find((signer) => signer.kid === row.kid);
        signers.set(alg, current ?? (await this.#importSigner(row.kid, alg, row.privateJwkEncrypted)));
      }
    }
    this.#keys = keys;
    this.#signers.clear();
    for (const [alg, signer] of signers) this.#signers.set(alg, signer);
    this.#loadedAt = this.#clock();
  }

  async #importSigner(kid: string, alg: SigningAlg, encrypted: string): Promise<SigningKey> {
    const jwk = decryptPrivateJwk(encrypted, kid, this.#encryptionKey) as JWK;
    const privateKey = (await importJWK(jwk, alg, { extractable: false })) as CryptoKey;
    return { kid, alg, privateKey, keyObject: KeyObject.from(privateKey) };
  }

  async #insertKey(alg: SigningAlg): Promise<void> {
    const row = await this.#createKeyRow(alg, new Date(this.#clock()).toISOString());
    await this.#db.kysely.insertInto('signingKeys').values(row).execute();
  }

  async #createKeyRow(alg: SigningAlg, createdAt: string): Promise<SigningKeysTable> {
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
      privateJwkEncrypted: encryptPrivateJwk(privateJwk, kid, this.#encryptionKey),
      createdAt,
      retiredAt: null,
    };
  }

  #publishedKey(kid: string): LoadedKey | null {
    const key = this.#keys.get(kid);
    return key && this.#isPublished(key) ? key : null;
  }

  #isPublished(key: LoadedKey): boolean {
    if (key.retiredAt === null) return true;
    return this.#clock() < Date.parse(key.retiredAt) + this.#retentionSeconds * 1000;
  }
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
