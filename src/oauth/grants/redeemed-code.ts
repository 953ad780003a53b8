import type { GrantStore } from '../../storage/grant-store.js';
import { OAuthError } from '../oauth-error.js';
import { GrantReuseError } from './grant-reuse-error.js';

/**
 * The answer to a code presented after it was redeemed, by what its redemption came to (read again, in
 * the grant's transaction: a concurrent exchange may have redeemed it since the caller read the row). Only a
 * code that issued tokens was leaked or replayed with something to end (RFC 6749 §4.1.2, RFC 9700
 * §4.5.3.1): its grant is revoked.
 * A code burnt by a failed exchange, or withdrawn with the user's grants, issued nothing.
 */
export async function refuseRedeemedCode(store: GrantStore, codeHash: string, grantId: string, userId: string, now: string): Promise<OAuthError> {
  const outcome = (await store.authorizationCodeOutcome(codeHash)) ?? 'issued';
  if (outcome === 'refused') {
    return new OAuthError('invalid_grant', 'This code was already presented in a failed exchange; start the authorization again.');
  }
  if (outcome === 'withdrawn') {
    return new OAuthError('invalid_grant', "This code was withdrawn before it was exchanged (the user's grants were ended); start the authorization again.");
  }
  const revoked = await store.revokeGrant(grantId, now);
  return new GrantReuseError(grantId, userId, 'The code was already used; the tokens issued for it are revoked.', revoked);
}
