import { calculateJwkThumbprint, compactVerify, CompactSign, exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Kysely, Selectable } from 'kysely';
import { decryptStoredJwk, encryptionKeysFrom, encryptPrivateJwk } from '../oauth/keys/key-encryption.js';
import type { AuditCheckpointsTable, Database } from '../storage/schema.js';
import { isUniqueViolation } from '../storage/unique-violation.js';

/**
 * Signed checkpoints of the audit chain. The hash chain alone shows an edit only to someone who trusts
 * the last hash: an attacker with write access can cut the tail or recompute every hash after an edit. A
 * checkpoint — the head's seq and hash, the number of events from the first, the time — signed with the
 * audit key and kept elsewhere too (`audit checkpoint`), makes both visible to `audit verify`.
 *
 * The audit key is its own ES256 key in `audit_keys`, apart from the token keys (`keys rotate` never
 * prunes it), its private part encrypted under KEY_ENCRYPTION_SECRET like theirs. Every checkpoint names
 * the key's RFC 7638 thumbprint, so a key planted in the database signs checkpoints an operator who pins
 * the fingerprint (`--key-fingerprint`) rejects.
 */

const ALG = 'ES256';
export const CHECKPOINT_TYP = 'portcullis-audit-checkpoint';
/** An archive's record: where the chain continues after `audit archive` removed the events before it. */
export const ARCHIVE_TYP = 'portcullis-audit-archive';

/** What a checkpoint states, as `audit_checkpoints` keeps it; the JWS signs exactly these fields. */
export type CheckpointClaims = Omit<AuditCheckpointsTable, 'jws'>;

export type Checkpoint = AuditCheckpointsTable;

export interface AuditSigningKey {
  fingerprint: string;
  privateKey: CryptoKey;
}

/**
 * The audit key, created on first use. Several may exist (two processes racing, or a row planted by
 * someone who can write the table): the oldest one whose private part decrypts under
 * KEY_ENCRYPTION_SECRET signs, so a planted row can neither sign nor stop the server.
 */
export async function auditSigningKey(
  db: Kysely<Database>,
  keyEncryptionSecret: string,
  previousKeyEncryptionSecret: string | null = null,
): Promise<AuditSigningKey> {
  // While KEY_ENCRYPTION_SECRET is being replaced, the key may still be under the previous one (keys rewrap).
  const encryptionKeys = encryptionKeysFrom({ keyEncryptionSecret, previousKeyEncryptionSecret });
  let stored = 0;
  const usable = async (): Promise<AuditSigningKey | null> => {
    const rows = await db.selectFrom('auditKeys').selectAll().orderBy('createdAt').orderBy('kid').execute();
    stored = rows.length;
    for (const row of rows) {
      let jwk: JWK;
      try {
        jwk = decryptStoredJwk(row.privateJwkEncrypted, row.kid, encryptionKeys) as JWK;
      } catch {
        continue;
      }
      const privateKey = (await importJWK(jwk, ALG, { extractable: false })) as CryptoKey;
      // The fingerprint of the public key stored beside it: a row whose two halves differ is not used.
      if ((await calculateJwkThumbprint(JSON.parse(row.publicJwk) as JWK)) !== row.kid) continue;
      return { fingerprint: row.kid, privateKey };
    }
    return null;
  };
  const existing = await usable();
  if (existing) return existing;
  // There is an audit key, and this secret opens none: a process with the wrong KEY_ENCRYPTION_SECRET must
  // not start a second key (checkpoints it signed would fail every check pinned to the real one).
  if (stored > 0) throw new AuditKeyDecryptionError();
  const pair = await generateKeyPair(ALG, { extractable: true });
  const publicJwk = await exportJWK(pair.publicKey);
  const kid = await calculateJwkThumbprint(publicJwk);
  await db
    .insertInto('auditKeys')
    .values({
      kid,
      publicJwk: JSON.stringify(publicJwk),
      privateJwkEncrypted: encryptPrivateJwk(await exportJWK(pair.privateKey), kid, encryptionKeys.current),
      createdAt: new Date().toISOString(),
    })
    .execute();
  return (await usable())!;
}

/** Audit keys exist and KEY_ENCRYPTION_SECRET (nor PREVIOUS_KEY_ENCRYPTION_SECRET) decrypts any of them. */
export class AuditKeyDecryptionError extends Error {
  constructor() {
    super('The audit key cannot be decrypted: is KEY_ENCRYPTION_SECRET the one it was stored with? (To change it, set the old one in PREVIOUS_KEY_ENCRYPTION_SECRET and run "keys rewrap"; see the README.)');
    this.name = 'AuditKeyDecryptionError';
  }
}

/** The public audit keys by fingerprint (recomputed from the key, never read from the kid column alone). */
export async function auditVerificationKeys(db: Kysely<Database>): Promise<Map<string, CryptoKey>> {
  const keys = new Map<string, CryptoKey>();
  for (const row of await db.selectFrom('auditKeys').select(['publicJwk']).execute()) {
    const jwk = JSON.parse(row.publicJwk) as JWK;
    keys.set(await calculateJwkThumbprint(jwk), (await importJWK(jwk, ALG)) as CryptoKey);
  }
  return keys;
}

export function toCheckpoint(row: Selectable<AuditCheckpointsTable>): Checkpoint {
  return {
    number: Number(row.number),
    headSeq: Number(row.headSeq),
    headHash: row.headHash,
    eventCount: Number(row.eventCount),
    time: row.time,
    keyFingerprint: row.keyFingerprint,
    jws: row.jws,
  };
}

export async function latestCheckpoint(db: Kysely<Database>): Promise<Checkpoint | null> {
  const row = await db.selectFrom('auditCheckpoints').selectAll().orderBy('number', 'desc').limit(1).executeTakeFirst();
  return row ? toCheckpoint(row) : null;
}

/**
 * Signs and records a checkpoint of the chain's current head. Returns the latest checkpoint unchanged when
 * no event was added since it (and null when there are no events at all). Concurrent writers in several
 * processes may race for the next number: the loser reads again and retries.
 */
export async function writeCheckpoint(db: Kysely<Database>, key: AuditSigningKey, now: () => number = Date.now): Promise<Checkpoint | null> {
  for (let attempt = 0; ; attempt++) {
    const previous = await latestCheckpoint(db);
    const head = await db.selectFrom('auditEvents').select(['seq', 'hash']).orderBy('seq', 'desc').limit(1).executeTakeFirst();
    if (!head || head.hash === null) return previous;
    const headSeq = Number(head.seq);
    if (previous && previous.headSeq >= headSeq) return previous;
    const counted = await db
      .selectFrom('auditEvents')
      .select((eb) => eb.fn.countAll<string | number>().as('n'))
      .where('seq', '>', previous?.headSeq ?? 0)
      .where('seq', '<=', headSeq)
      .executeTakeFirstOrThrow();
    const base = previous?.eventCount ?? (await archivedCount(db));
    const claims: CheckpointClaims = {
      number: (previous?.number ?? 0) + 1,
      headSeq,
      headHash: head.hash,
      eventCount: base + Number(counted.n),
      time: new Date(now()).toISOString(),
      keyFingerprint: key.fingerprint,
    };
    const jws = await signAuditStatement(key, CHECKPOINT_TYP, claims);
    try {
      await db.insertInto('auditCheckpoints').values({ ...claims, jws }).execute();
      return { ...claims, jws };
    } catch (error) {
      if (!numberTaken(error) || attempt >= 5) throw error;
    }
  }
}

/**
 * Another process wrote the checkpoint of this number first (several workers close at once): on
 * PostgreSQL the primary key says so, on SQLite the append-only trigger fires before the key is checked.
 */
function numberTaken(error: unknown): boolean {
  return isUniqueViolation(error) || (error instanceof Error && error.message === 'audit_checkpoints is append-only: a row may not be replaced');
}

/** Events removed by `audit archive` before the first checkpoint could count them (none, in practice). */
async function archivedCount(db: Kysely<Database>): Promise<number> {
  const row = await db.selectFrom('auditArchives').select('eventCount').orderBy('upToSeq', 'desc').limit(1).executeTakeFirst();
  return row ? Number(row.eventCount) : 0;
}

export class AuditSignatureError extends Error {}

/** A statement about the audit chain (a checkpoint, an archive), signed with the audit key as a compact JWS. */
export function signAuditStatement(key: AuditSigningKey, typ: string, claims: { keyFingerprint: string }): Promise<string> {
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims))).setProtectedHeader({ alg: ALG, kid: key.fingerprint, typ }).sign(key.privateKey);
}

/** A statement's claims, if its signature holds under the key its header names (one of `keys`). */
export async function readAuditStatement<T extends { keyFingerprint: string }>(jws: string, keys: ReadonlyMap<string, CryptoKey>, typ: string): Promise<T & { jws: string }> {
  let kid: unknown;
  try {
    const header = JSON.parse(Buffer.from(jws.split('.')[0] ?? '', 'base64url').toString('utf8')) as { kid?: unknown; alg?: unknown; typ?: unknown };
    if (header.alg !== ALG || header.typ !== typ) throw new AuditSignatureError(`not a ${typ} statement`);
    kid = header.kid;
  } catch (error) {
    if (error instanceof AuditSignatureError) throw error;
    throw new AuditSignatureError('not a compact JWS');
  }
  const key = typeof kid === 'string' ? keys.get(kid) : undefined;
  if (!key) throw new AuditSignatureError(`signed by a key that is not an audit key of this database (${String(kid)})`);
  let payload: Uint8Array;
  try {
    ({ payload } = await compactVerify(jws, key, { algorithms: [ALG] }));
  } catch {
    throw new AuditSignatureError('the signature does not verify');
  }
  const claims = JSON.parse(new TextDecoder().decode(payload)) as T;
  if (claims.keyFingerprint !== kid) throw new AuditSignatureError('the key named inside differs from the signing key');
  return { ...claims, jws };
}

export function readSignedCheckpoint(jws: string, keys: ReadonlyMap<string, CryptoKey>): Promise<Checkpoint> {
  return readAuditStatement<CheckpointClaims>(jws, keys, CHECKPOINT_TYP);
}
