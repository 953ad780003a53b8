import type { Kysely } from 'kysely';
import { insertAuthorizationCode, type AuthorizationCodeRow } from '../../storage/authorization-codes.js';
import { writeTransaction } from '../../storage/write-transaction.js';
import { lockSignedIn, type SignedIn } from '../browser/sign-in-sessions.js';
import { newId } from '../../storage/ids.js';
import type { Database } from '../../storage/schema.js';
import { withQuery } from '../redirect-uri.js';
import { declined } from '../scopes.js';
import { digestSecret, generateSecret } from '../secrets.js';
import type { AuthorizationRequest } from './authorization-request.js';

/** RFC 6749 §4.1.2 recommends at most ten minutes; a minute is plenty for a redirect and a back-channel call. */
export const CODE_TTL_SECONDS = 60;

export interface IssuedCode {
  location: string;
  grantId: string;
}

/**
 * A single-use code bound to the client registration, the user, the exact redirect_uri and the PKCE
 * challenge; stored as its digest. The response carries `state` and `iss` (RFC 9207 §2). Null when the
 * user's session ended before the code could be stored.
 */
export async function issueAuthorizationCode(
  db: Kysely<Database>,
  issuer: string,
  request: AuthorizationRequest,
  grant: { signedIn: SignedIn; scopes: readonly string[]; rememberedDeclines?: readonly string[] },
  now: number,
): Promise<IssuedCode | null> {
  const code = generateSecret();
  const grantId = newId();
  const { signedIn } = grant;
  const row: AuthorizationCodeRow = {
    codeHash: digestSecret(code),
    grantId,
    clientId: request.clientId,
    clientRegistrationId: request.clientRegistrationId,
    userId: signedIn.user.id,
    redirectUri: request.redirectUri,
    codeChallenge: request.codeChallenge,
    scopes: grant.scopes.join(' '),
    nonce: request.nonce,
    authTime: new Date(signedIn.authTime * 1000).toISOString(),
    issuedAt: new Date(now).toISOString(),
    expiresAt: new Date(now + CODE_TTL_SECONDS * 1000).toISOString(),
    redeemedAt: null,
    outcome: null,
    declinedScopes: declined([...request.scopes, ...(grant.rememberedDeclines ?? [])], grant.scopes),
  };
  // Stored only while the session that granted it is live: signing out everywhere in the meantime ends
  // the session, and a code stored after that would outlive it (lockSignedIn).
  const stored = await writeTransaction(db, async (trx) => {
    if (!(await lockSignedIn(trx, signedIn, now))) return false;
    await insertAuthorizationCode(trx, row);
    return true;
  });
  if (!stored) return null;
  return { location: withQuery(request.redirectUri, { code, state: request.state, iss: issuer }), grantId };
}

/** An error response to the client (RFC 6749 §4.1.2.1), with `iss` (RFC 9207). */
export function errorRedirect(redirectUri: string, issuer: string, error: string, description: string, state: string | undefined): string {
  return withQuery(redirectUri, { error, error_description: description, state, iss: issuer });
}
