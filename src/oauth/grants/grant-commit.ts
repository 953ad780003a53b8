import type { Kysely } from 'kysely';
import { lockClientRegistration, lockUser, type LockedUser } from '../../storage/row-locks.js';
import type { Database } from '../../storage/schema.js';
import { writeTransaction } from '../../storage/write-transaction.js';
import { OAuthError } from '../oauth-error.js';
import { insertUserTokenRows, type UserGrant, type UserTokenRows } from '../tokens/user-tokens.js';

/** A user grant whose request was checked; what remains is to use it up and store its tokens. */
export interface CheckedGrant extends UserGrant {
  /**
   * Runs in the grant's transaction under the user's lock: marks the code or refresh token used if it
   * still may be, and checks the user. Returns the refusal to answer with (thrown once the transaction
   * commits, so what it wrote stays: a burnt code, a revoked family), or null to store the tokens.
   */
  claim(trx: Kysely<Database>, user: LockedUser | null): Promise<OAuthError | null>;
}

/**
 * Why a grant is one transaction. Revoking a user's tokens (password change, sign-out everywhere,
 * deactivation, consent withdrawn) or a client's (deletion, secret rotation) updates the rows that exist
 * when it runs. A grant that used up its code or refresh token before a revocation and stored its new
 * tokens after it would hand out a family the revocation never saw. So the grant takes the user's lock,
 * then the client registration's, and only then reads and marks its code or token, checks the user and
 * stores the tokens, all in one transaction; every revocation by user or by client takes the same lock
 * first (access-token-records.ts). Whichever commits second sees the other's rows: a grant after a
 * revocation finds its token revoked or its code ended, a revocation after a grant revokes its tokens.
 *
 * Serialising on the user was chosen over persisted cut-off times ("tokens of this user from before T are
 * dead") because it leaves no window by construction, adds nothing to token verification (a cut-off would
 * be one more lookup on every cache miss, compared across instances' clocks), and costs only the lock: a
 * user's grants are rare and short, and a client's grants for different users share its lock. Signing
 * happens before the transaction, so the locks are held for a few statements. `beforeInsert` is a test
 * seam: a revocation started there must wait for this commit and then revoke what it stored.
 */
export async function commitUserGrant(db: Kysely<Database>, grant: CheckedGrant, rows: UserTokenRows, beforeInsert?: () => Promise<void>): Promise<void> {
  const refusal = await writeTransaction(db, async (trx) => {
    const user = await lockUser(trx, grant.userId);
    const registration = await lockClientRegistration(trx, grant.client.id);
    // Deleted, or changed (a new secret, fewer scopes) since the client authenticated: nothing is used up
    // (the transaction rolls back) and the client asks again under its registration as it is now.
    if (registration === undefined || registration.updatedAt !== grant.client.updatedAt) {
      throw new OAuthError('invalid_grant', 'The client registration changed during the request; send it again.');
    }
    const refused = await grant.claim(trx, user);
    if (refused !== null) return refused;
    await beforeInsert?.();
    await insertUserTokenRows(trx, rows);
    return null;
  });
  if (refusal !== null) throw refusal;
}
