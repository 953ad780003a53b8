import { decodeProtectedHeader, errors, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import { SIGNING_ALG, type KeyStore, type SigningKey } from '../keys/key-store.js';
import { InvalidTokenError } from './invalid-token-error.js';
import { MAX_ACCESS_TOKEN_TTL } from './lifetime.js';

/** RFC 9068 §2.1: the media type of a JWT access token, carried in the `typ` header. */
export const ACCESS_TOKEN_TYP = 'at+jwt';

/** RFC 9068 §2.2: claims every access token carries (`scope` too, §2.2.3, since every token has scopes). */
const REQUIRED_CLAIMS = ['iss', 'aud', 'exp', 'iat', 'sub', 'client_id', 'jti', 'scope'];

export interface AccessTokenClaims {
  iss: string;
  aud: string;
  sub: string;
  client_id: string;
  jti: string;
  scope: string;
  iat: number;
  exp: number;
}

export function signJwtAccessToken(claims: AccessTokenClaims, key: SigningKey): Promise<string> {
  const { iss, aud, sub, client_id, jti, scope, iat, exp } = claims;
  return new SignJWT({ client_id, scope })
    .setProtectedHeader({ alg: key.alg, typ: ACCESS_TOKEN_TYP, kid: key.kid })
    .setIssuer(iss)
    .setAudience(aud)
    .setSubject(sub)
    .setJti(jti)
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .sign(key.privateKey);
}

export interface JwtVerificationContext {
  keys: KeyStore;
  /** This server is its own single resource server: `iss` and `aud` are both the issuer URL. */
  issuer: string;
  clockSkew: number;
  now: number;
}

/**
 * RFC 9068 §4 validation: `typ` is at+jwt, the algorithm is pinned to ES256 (so neither `none` nor an
 * HMAC keyed with the public key can pass, RFC 8725 §3.1), the kid names one of our published keys, the
 * signature holds, iss and aud are ours, exp/nbf/iat are within the allowed skew, and the required
 * claims are present with the right types.
 */
export async function verifyJwtAccessToken(token: string, context: JwtVerificationContext): Promise<AccessTokenClaims> {
  const kid = readKid(token);
  const key = await context.keys.verificationKey(kid);
  if (!key) throw new InvalidTokenError('unknown kid');
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, key, {
      algorithms: [SIGNING_ALG],
      typ: ACCESS_TOKEN_TYP,
      issuer: context.issuer,
      audience: context.issuer,
      clockTolerance: context.clockSkew,
      // Makes jose check that iat is not in the future beyond the skew; no token lives longer than this.
      maxTokenAge: MAX_ACCESS_TOKEN_TTL,
      requiredClaims: REQUIRED_CLAIMS,
      currentDate: new Date(context.now),
    }));
  } catch (error) {
    if (error instanceof errors.JOSEError) throw new InvalidTokenError(describeJoseError(error));
    throw error;
  }
  return readClaims(payload);
}

function readKid(token: string): string {
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    throw new InvalidTokenError('malformed header');
  }
  // Checked here as well as by jwtVerify so that a forged header never causes a key lookup.
  if (header.alg !== SIGNING_ALG) throw new InvalidTokenError('alg not allowed');
  if (typeof header.kid !== 'string' || header.kid === '') throw new InvalidTokenError('missing kid');
  return header.kid;
}

function readClaims(payload: JWTPayload): AccessTokenClaims {
  const { iss, aud, sub, client_id, jti, scope, iat, exp } = payload;
  if (
    typeof iss !== 'string' ||
    typeof aud !== 'string' ||
    typeof sub !== 'string' ||
    typeof client_id !== 'string' ||
    typeof jti !== 'string' ||
    typeof scope !== 'string' ||
    typeof iat !== 'number' ||
    typeof exp !== 'number'
  ) {
    throw new InvalidTokenError('claim types');
  }
  return { iss, aud, sub, client_id, jti, scope, iat, exp };
}

function describeJoseError(error: errors.JOSEError): string {
  if (error instanceof errors.JWTExpired) return `expired (${error.claim})`;
  if (error instanceof errors.JWTClaimValidationFailed) return `${error.claim} ${error.reason}`;
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'signature invalid';
  if (error instanceof errors.JOSEAlgNotAllowed) return 'alg not allowed';
  return `malformed (${error.code})`;
}
