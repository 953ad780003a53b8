import type { Kysely } from 'kysely';
import { findAuthorizationCode, type AuthorizationCodeRow } from '../../storage/authorization-codes.js';
import type { ClientRecord } from '../../storage/clients.js';
import type { Database } from '../../storage/schema.js';
import { AUTHORIZATION_CODE } from '../authorize/authorization-request.js';
import { OAuthError } from '../oauth-error.js';
import { checkPkce } from '../pkce.js';
import { matchRedirectUri } from '../redirect-uri.js';
import { digestSecret } from '../secrets.js';
import type { CheckedGrant } from './grant-commit.js';
import { refuseRedeemedCode } from './redeemed-code.js';

/**
 * RFC 6749 §4.1.3 with RFC 7636 §4.6: the code is redeemed once (in the grant's transaction,
 * grant-commit.ts), by the client it was issued to, with the redirect_uri it was issued for and the
 * verifier of its challenge. A second presentation of a redeemed code revokes everything the first one
 * issued (§4.1.2, RFC 9700 §4.5.3.1): the code leaked.
 */
export async function grantAuthorizationCode(
  db: Kysely<Database>,
  client: ClientRecord,
  params: Readonly<Record<string, string>>,
  now: number,
): Promise<CheckedGrant> {
  if (!client.grantTypes.includes(AUTHORIZATION_CODE)) {
    throw new OAuthError('unauthorized_client', 'The client may not use the authorization code grant.');
  }
  const { code, redirect_uri: redirectUri, code_verifier: verifier } = params;
  if (code === undefined) throw new OAuthError('invalid_request', 'code is required.');
  if (redirectUri === undefined) throw new OAuthError('invalid_request', 'redirect_uri is required.');
  const codeHash = digestSecret(code);
  const row = await findAuthorizationCode(db, codeHash);
  // Another client's code is refused without touching it: the client may not even know it is a code.
  if (!row || row.clientRegistrationId !== client.id) throw new OAuthError('invalid_grant', 'The code is not valid.');
  const nowIso = new Date(now).toISOString();
  // Checked now, answered once the code is redeemed (burnt) in the grant's transaction: a wrong verifier or
  // redirect_uri does not leave the code open to more guesses.
  const invalid = checkRedemption(row, client.redirectUris, redirectUri, verifier, now);
  // The client's registration may have lost scopes since the user consented.
  const scopes = row.scopes.split(' ').filter((scope) => client.scopes.includes(scope));
  return {
    client,
    userId: row.userId,
    scopes,
    grantId: row.grantId,
    grantType: AUTHORIZATION_CODE,
    authTime: Math.floor(Date.parse(row.authTime) / 1000),
    nonce: row.nonce,
    declinedScopes: row.declinedScopes?.split(' ') ?? [],
    claim: async (store, user) => {
      const refusal = invalid ?? (!user || !user.active ? new OAuthError('invalid_grant', 'The user who granted the code can no longer sign in.') : null);
      // Redeemed with what the exchange came to, so that a later presentation is told which.
      if (!(await store.redeemAuthorizationCode(codeHash, nowIso, refusal === null ? 'issued' : 'refused'))) {
        // Used already, or ended by a revocation of the user's grants: what it issued, if anything, ends.
        return refuseRedeemedCode(store, codeHash, row.grantId, row.userId, nowIso);
      }
      return refusal;
    },
  };
}

function checkRedemption(
  row: AuthorizationCodeRow,
  registeredRedirectUris: readonly string[],
  redirectUri: string,
  verifier: string | undefined,
  now: number,
): OAuthError | null {
  if (Date.parse(row.expiresAt) <= now) return new OAuthError('invalid_grant', 'The code has expired.');
  if (row.redirectUri !== redirectUri) return new OAuthError('invalid_grant', 'redirect_uri does not match the authorization request.');
  // The registration may have lost that redirect URI since the code was issued: the code went to an
  // address that may no longer be the client's, so it buys nothing.
  if (matchRedirectUri(registeredRedirectUris, row.redirectUri) === null) {
    return new OAuthError('invalid_grant', 'The redirect_uri is no longer registered for this client.');
  }
  try {
    checkPkce(verifier, row.codeChallenge);
  } catch (error) {
    if (error instanceof OAuthError) return error;
    throw error;
  }
  return null;
}
