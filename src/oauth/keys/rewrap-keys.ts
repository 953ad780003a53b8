import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.js';
import { writeTransaction } from '../../storage/write-transaction.js';
import { decryptPrivateJwk, encryptPrivateJwk } from './key-encryption.js';

export interface RewrapResult {
  /** Re-encrypted from the previous secret's key to the current one's. */
  signingKeys: number;
  auditKeys: number;
  /** Already under the current secret's key (made since it was set, or re-encrypted by an earlier run). */
  alreadyCurrent: number;
  /**
   * Audit key rows neither key decrypts, left as they are: a row planted beside the audit key never signs
   * (audit/checkpoints.ts), and the table keeps every row.
   */
  unreadableAuditKeys: string[];
}

/** A stored key that can be re-encrypted by neither secret: nothing was changed. */
export class RewrapError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RewrapError';
  }
}

type Outcome = { kind: 'rewrapped'; stored: string } | { kind: 'current' } | { kind: 'unreadable' };

function rewrap(stored: string, kid: string, keys: { current: Buffer; previous: Buffer }): Outcome {
  try {
    decryptPrivateJwk(stored, kid, keys.current);
    return { kind: 'current' };
  } catch {
    // not under the current key: try the previous one
  }
  try {
    return { kind: 'rewrapped', stored: encryptPrivateJwk(decryptPrivateJwk(stored, kid, keys.previous), kid, keys.current) };
  } catch {
    return { kind: 'unreadable' };
  }
}

/**
 * Re-encrypts every stored private key — the token signing keys and the audit key — from the previous
 * KEY_ENCRYPTION_SECRET's key to the current one's, in one transaction. Every key is decrypted before
 * anything is written: a signing key that decrypts under neither (a wrong previous secret), or an audit
 * log whose every key does, changes nothing. Public parts and key ids stay as they are, so published
 * keys, issued tokens and signed audit checkpoints stay valid.
 */
export async function rewrapStoredKeys(db: Kysely<Database>, keys: { current: Buffer; previous: Buffer }): Promise<RewrapResult> {
  return writeTransaction(db, async (trx) => {
    const signing = (await trx.selectFrom('signingKeys').select(['kid', 'privateJwkEncrypted']).orderBy('kid').execute()).map((row) => ({
      kid: row.kid,
      outcome: rewrap(row.privateJwkEncrypted, row.kid, keys),
    }));
    const unreadable = signing.filter((key) => key.outcome.kind === 'unreadable').map((key) => key.kid);
    if (unreadable.length > 0) {
      throw new RewrapError(
        `signing key ${unreadable.join(', ')} decrypts under neither PREVIOUS_KEY_ENCRYPTION_SECRET nor KEY_ENCRYPTION_SECRET; nothing was changed`,
      );
    }
    const audit = (await trx.selectFrom('auditKeys').select(['kid', 'privateJwkEncrypted']).orderBy('kid').execute()).map((row) => ({
      kid: row.kid,
      outcome: rewrap(row.privateJwkEncrypted, row.kid, keys),
    }));
    if (audit.length > 0 && audit.every((key) => key.outcome.kind === 'unreadable')) {
      throw new RewrapError('the audit key decrypts under neither PREVIOUS_KEY_ENCRYPTION_SECRET nor KEY_ENCRYPTION_SECRET; nothing was changed');
    }
    const result: RewrapResult = { signingKeys: 0, auditKeys: 0, alreadyCurrent: 0, unreadableAuditKeys: [] };
    for (const { kid, outcome } of signing) {
      if (outcome.kind === 'rewrapped') {
        await trx.updateTable('signingKeys').set({ privateJwkEncrypted: outcome.stored }).where('kid', '=', kid).execute();
        result.signingKeys++;
      } else result.alreadyCurrent++;
    }
    for (const { kid, outcome } of audit) {
      if (outcome.kind === 'rewrapped') {
        // The one column of audit_keys that may change (migration 015).
        await trx.updateTable('auditKeys').set({ privateJwkEncrypted: outcome.stored }).where('kid', '=', kid).execute();
        result.auditKeys++;
      } else if (outcome.kind === 'current') result.alreadyCurrent++;
      else result.unreadableAuditKeys.push(kid);
    }
    return result;
  });
}
