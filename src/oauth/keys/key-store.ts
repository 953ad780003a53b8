import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Config } from '../../config/config.js';
import type { Db } from '../../storage/dialect.js';
import type { SigningKeysTable } from '../../storage/schema.js';
import { MAX_ACCESS_TOKEN_TTL } from '../tokens/lifetime.js';
import { decryptPrivateJwk, deriveEncryptionKey, encryptPrivateJwk } from './key-encryption.js';

/** RFC 9068 §2.1 recommends ES256-class asymmetric signatures; this server signs with ES256 only. */
export const SIGNING_ALG = 'ES256';

/** Another instance may rotate: keys are re-read at least this often for signing and for the JWKS. */
const REFRESH_MS = 60_000;
/** A token with an unknown kid triggers at most one database read per this interval (no amplification). */
const UNKNOWN_KID_RELOAD_MS = 10_000;

export interface SigningKey {
  kid: string;
  alg: typeof SIGNING_ALG;
  privateKey: CryptoKey;
}

/** A published key: public members only (RFC 7517 §4, RFC 7518 §6.2.1). */
export interface PublicJwk {
  kty: string;
  crv: string;
  x: string;
  y: string;
  kid: string;
  alg: string;
  use: 'sig';
}

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
  #signer: SigningKey | null = null;
  #loadedAt = Number.NEGATIVE_INFINITY;
  #loading: Promise<void> | null = null;

  private constructor(db: Db, config: Config, options: KeyStoreOptions) {
    this.#db = db;
    this.#encryptionKey = deriveEncryptionKey(config.keyEncryptionSecret);
    this.#clock = options.clock ?? Date.now;
    this.#retentionSeconds = MAX_ACCESS_TOKEN_TTL + REFRESH_MS / 1000 + config.tokens.clockSkew;
  }

  /** Loads the keys, creating the first one when the table has none that may sign. */
  static async open(db: Db, config: Config, options: KeyStoreOptions = {}): Promise<KeyStore> {
    const store = new KeyStore(db, config, options);
    await store.refresh();
    if (!store.#signer) {
      await store.#insertKey();
      await store.refresh();
    }
    return store;
  }

  async signingKey(): Promise<SigningKey> {
    await this.#refreshIfOlderThan(REFRESH_MS);
    if (!this.#signer) {
      await this.#insertKey();
      await this.refresh();
    }
    return this.#signer!;
  }

  /** The public key for `kid`, or null when no published key has that id. */
  async verificationKey(kid: string): Promise<CryptoKey | null> {
    const known = this.#publishedKey(kid);
    if (known) return known.publicKey;
    await this.#refreshIfOlderThan(UNKNOWN_KID_RELOAD_MS);
    return this.#publishedKey(kid)?.publicKey ?? null;
  }

  async publicJwks(): Promise<JwksDocument> {
    await this.#refreshIfOlderThan(REFRESH_MS);
    const keys = [...this.#keys.values()].filter((key) => this.#isPublished(key)).map((key) => ({ ...key.jwk }));
    return { keys };
  }

  /**
   * A new key takes over signing; every key that was signing is retired (stays published for the
   * retention period) and keys retired longer ago than that are deleted. Returns the new kid.
   */
  async rotate(): Promise<string> {
    const now = new Date(this.#clock());
    const row = await this.#createKeyRow(now.toISOString());
    const pruneBefore = new Date(now.getTime() - this.#retentionSeconds * 1000).toISOString();
    await this.#db.kysely.transaction().execute(async (trx) => {
      await trx.updateTable('signingKeys').set({ retiredAt: row.createdAt }).where('retiredAt', 'is', null).execute();
      await trx.insertInto('signingKeys').values(row).execute();
      await trx.deleteFrom('signingKeys').where('retiredAt', '<=', pruneBefore).execute();
    });
    await this.refresh();
    return row.kid;
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
    for (const row of rows) {
      const previous = this.#keys.get(row.kid);
      const jwk = previous?.jwk ?? toPublicJwk(JSON.parse(row.publicJwk) as JWK, row.kid);
      const publicKey = previous?.publicKey ?? ((await importJWK(jwk, SIGNING_ALG)) as CryptoKey);
      keys.set(row.kid, { jwk, publicKey, retiredAt: row.retiredAt });
    }
    const signerRow = rows.find((row) => row.retiredAt === null);
    let signer: SigningKey | null = null;
    if (signerRow) {
      signer = this.#signer?.kid === signerRow.kid ? this.#signer : await this.#importSigner(signerRow.kid, signerRow.privateJwkEncrypted);
    }
    this.#keys = keys;
    this.#signer = signer;
    this.#loadedAt = this.#clock();
  }

  async #importSigner(kid: string, encrypted: string): Promise<SigningKey> {
    const jwk = decryptPrivateJwk(encrypted, kid, this.#encryptionKey) as JWK;
    const privateKey = (await importJWK(jwk, SIGNING_ALG, { extractable: false })) as CryptoKey;
    return { kid, alg: SIGNING_ALG, privateKey };
  }

  async #insertKey(): Promise<void> {
    const row = await this.#createKeyRow(new Date(this.#clock()).toISOString());
    await this.#db.kysely.insertInto('signingKeys').values(row).execute();
  }

  async #createKeyRow(createdAt: string): Promise<SigningKeysTable> {
    const pair = await generateKeyPair(SIGNING_ALG, { extractable: true });
    const publicMembers = await exportJWK(pair.publicKey);
    // RFC 7638 thumbprint: a kid derived from the key itself, unique without coordination.
    const kid = await calculateJwkThumbprint(publicMembers);
    const privateJwk = await exportJWK(pair.privateKey);
    return {
      kid,
      alg: SIGNING_ALG,
      publicJwk: JSON.stringify(toPublicJwk(publicMembers, kid)),
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

/** Copies only the public EC members, whatever the stored JSON holds. */
function toPublicJwk(jwk: JWK, kid: string): PublicJwk {
  const { kty, crv, x, y } = jwk;
  if (kty !== 'EC' || crv !== 'P-256' || typeof x !== 'string' || typeof y !== 'string') {
    throw new Error(`Signing key ${kid} is not a P-256 EC key`);
  }
  return { kty, crv, x, y, kid, alg: SIGNING_ALG, use: 'sig' };
}
