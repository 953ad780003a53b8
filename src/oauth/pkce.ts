import { createHash, timingSafeEqual } from 'node:crypto';
import { OAuthError } from './oauth-error.js';

/** RFC 7636 §4.1: code_verifier = 43*128unreserved. */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
/** RFC 7636 §4.2: BASE64URL(SHA256(verifier)) is 43 characters without padding. */
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/** The only method this server accepts (RFC 9700 §2.1.1: `plain` offers no protection against a leaked request). */
export const PKCE_METHOD = 'S256';

export function isCodeChallenge(value: string): boolean {
  return CHALLENGE.test(value);
}

/**
 * RFC 7636 §4.6: the verifier hashes to the challenge the authorization request carried. A code issued
 * without a challenge must not be redeemed with a verifier either (RFC 9700 §2.1.1, PKCE downgrade).
 */
export function checkPkce(verifier: string | undefined, challenge: string | null): void {
  if (challenge === null) {
    if (verifier !== undefined) throw new OAuthError('invalid_grant', 'The authorization request carried no code_challenge.');
    return;
  }
  if (verifier === undefined) throw new OAuthError('invalid_grant', 'code_verifier is required.');
  if (!VERIFIER.test(verifier)) throw new OAuthError('invalid_grant', 'The code_verifier is malformed.');
  const computed = Buffer.from(createHash('sha256').update(verifier, 'ascii').digest('base64url'));
  const expected = Buffer.from(challenge);
  if (computed.length !== expected.length || !timingSafeEqual(computed, expected)) {
    throw new OAuthError('invalid_grant', 'The code_verifier does not match the code_challenge.');
  }
}
