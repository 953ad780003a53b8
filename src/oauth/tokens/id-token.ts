import { createHash } from 'node:crypto';
import { SignJWT } from 'jose';
import type { SigningKey } from '../keys/key-store.js';

export interface IdTokenClaims {
  issuer: string;
  /** The client the ID token is for (`aud`, OpenID Connect Core §2). */
  clientId: string;
  subject: string;
  authTime: number;
  nonce: string | null;
  /** The access token issued with it, for `at_hash` (§3.1.3.6). */
  accessToken: string;
  issuedAt: number;
  expiresAt: number;
}

/**
 * OpenID Connect Core §2 / §3.1.3.6: an ID token says who signed in, for which client, when. `typ` is JWT,
 * never at+jwt, so an ID token cannot pass as an access token (the resource server requires at+jwt).
 */
export function signIdToken(claims: IdTokenClaims, key: SigningKey): Promise<string> {
  const payload: Record<string, unknown> = { auth_time: claims.authTime, at_hash: atHash(claims.accessToken) };
  if (claims.nonce !== null) payload.nonce = claims.nonce;
  return new SignJWT(payload)
    .setProtectedHeader({ alg: key.alg, typ: 'JWT', kid: key.kid })
    .setIssuer(claims.issuer)
    .setAudience(claims.clientId)
    .setSubject(claims.subject)
    .setIssuedAt(claims.issuedAt)
    .setExpirationTime(claims.expiresAt)
    .sign(key.privateKey);
}

/** §3.1.3.6: the left half of the SHA-256 of the access token's ASCII, base64url (both algs hash with SHA-256). */
export function atHash(accessToken: string): string {
  const digest = createHash('sha256').update(accessToken, 'ascii').digest();
  return digest.subarray(0, digest.length / 2).toString('base64url');
}
