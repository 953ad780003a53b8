import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../dialect.js';

/**
 * `audit_keys` stays append-only except for the encrypted private part, which `keys rewrap` re-encrypts when
 * KEY_ENCRYPTION_SECRET is replaced: the key itself — its fingerprint, public part and time — cannot change,
 * and a row cannot be removed. Whoever could write that column could make the audit key unusable but not
 * replace it: a ciphertext needs the secret, one copied from another row does not decrypt (the kid is bound
 * into it), and checkpoints signed by a new audit key are what `audit verify --key-fingerprint` reports.
 */
export const auditKeyRewrap = (dialect: DialectName): Migration => ({
  async up(db: Kysely<unknown>) {
    if (dialect === 'postgres') {
      await sql`drop trigger audit_keys_append_only on audit_keys`.execute(db);
      await sql`
        create trigger audit_keys_no_delete before delete on audit_keys
        for each row execute function audit_events_append_only()`.execute(db);
      await sql`
        create trigger audit_keys_no_update before update of kid, public_jwk, created_at on audit_keys
        for each row execute function audit_events_append_only()`.execute(db);
    } else {
      await sql`drop trigger audit_keys_no_update`.execute(db);
      await sql`
        create trigger audit_keys_no_update before update of kid, public_jwk, created_at on audit_keys
        begin select raise(abort, 'audit_keys is append-only'); end`.execute(db);
    }
  },
});
