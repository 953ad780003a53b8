import type { Kysely } from 'kysely';
import { insertAuthorizationCode } from '../../storage/authorization-codes.js';
import { newId } from '../../storage/ids.js';
import type { Database } from '../../storage/schema.js';
import { withQuery } from '../redirect-uri.js';
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
 * challenge; stored as its digest. The response carries `state` and `iss` (RFC 9207 §2).
 */
export async function issueAuthorizationCode(
  db: Kysely<Database>,
  issuer: string,
  request: AuthorizationRequest,
  grant: { userId: string; authTime: number; scopes: readonly string[] },
  now: number,
): Promise<IssuedCode> {
  const code = generateSecret();
  const grantId = newId();
  await insertAuthorizationCode(db, {
    codeHash: digestSecret(code),
    grantId,
    clientId: request.clientId,
    clientRegistrationId: request.clientRegistrationId,
    userId: grant.userId,
    redirectUri: request.redirectUri,
    codeChallenge: request.codeChallenge,
    scopes: grant.scopes.join(' '),
    nonce: request.nonce,
    authTime: new Date(grant.authTime * 1000).toISOString(),
    issuedAt: new Date(now).toISOString(),
    expiresAt: new Date(now + CODE_TTL_SECONDS * 1000).toISOString(),
    redeemedAt: null,
  });
  return { location: withQuery(request.redirectUri, { code, state: request.state, iss: issuer }), grantId };
}

/** An error response to the client (RFC 6749 §4.1.2.1), with `iss` (RFC 9207). */
export function errorRedirect(redirectUri: string, issuer: string, error: string, description: string, state: string | undefined): string {
  return withQuery(redirectUri, { error, error_description: description, state, iss: issuer });
}
