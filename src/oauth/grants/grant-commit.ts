import { sameRegistrationState, type GrantStore } from '../../storage/grant-store.js';
import type { LockedUser } from '../../storage/row-locks.js';
import { OAuthError } from '../oauth-error.js';
import type { TokenService } from '../tokens/token-service.js';
import { tokenRows, type UserGrant, type UserTokenRows } from '../tokens/user-tokens.js';

/** A user grant whose request was checked; what remains is to use it up and store its tokens. */
export interface CheckedGrant extends UserGrant {
  /**
   * Runs in the grant's transaction under the user's lock: marks the code or refresh token used if it
   * still may be, and checks the user. Returns the refusal to answer with (thrown once the transaction
   * commits, so what it wrote stays: a burnt code, a revoked family), or null to store the tokens.
   */
  claim(store: GrantStore, user: LockedUser | null): Promise<OAuthError | null>;
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
 * happens before the transaction, so the locks are held for a few statements. On SQLite the transaction is
 * the one this event-loop turn's token rows share (turn-batch.ts), where the write lock is the lock.
 * `beforeInsert` is a test seam: a revocation started there must wait for this commit and then revoke what
 * it stored.
 */
/** The client's registration changed while a grant ran: nothing was used up, and a retry reads it anew. */
export class RegistrationChangedError extends OAuthError {
  constructor() {
    super('invalid_grant', 'The client registration changed during the request; send it again.');
  }
}

export async function commitUserGrant(tokens: TokenService, grant: CheckedGrant, rows: UserTokenRows, beforeInsert?: () => Promise<void>): Promise<void> {
  const refusal = await tokens.transact(async (store) => {
    const user = await store.lockUser(grant.userId);
    const registration = await store.lockClientRegistration(grant.client.id);
    // Deleted, or changed (a new secret, fewer scopes, its tokens revoked) since the client authenticated:
    // nothing is used up (the transaction rolls back) and the client asks again under its registration as
    // it is now.
    if (!sameRegistrationState(registration, grant.client)) throw new RegistrationChangedError();
    const refused = await grant.claim(store, user);
    if (refused !== null) return refused;
    await beforeInsert?.();
    await store.insertRows(tokenRows(rows));
    return null;
  });
  if (refusal !== null) throw refusal;
}
