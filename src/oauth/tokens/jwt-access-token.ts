import { decodeProtectedHeader, errors, jwtVerify, type JWTPayload } from 'jose';
import { generateKeyPairSync, sign } from 'node:crypto';
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
  /**
   * A self-contained token's (client credentials: no row is stored, token-service.ts): the `clients.id` of
   * the registration it was issued to, and that registration's `revocations` count at the time. Private
   * claims (RFC 7519 §4.3), present together or not at all.
   */
  reg?: string;
  rev?: number;
}

/** What signing an access token takes of a key. */
type AccessTokenSigner = Pick<SigningKey, 'kid' | 'alg' | 'keyObject'>;

/** The encoded protected header of each key, made once: it is the same for every token the key signs. */
const encodedHeaders = new WeakMap<AccessTokenSigner, string>();

function encodedHeader(key: AccessTokenSigner): string {
  let header = encodedHeaders.get(key);
  if (header === undefined) {
    header = Buffer.from(JSON.stringify({ alg: key.alg, typ: ACCESS_TOKEN_TYP, kid: key.kid })).toString('base64url');
    encodedHeaders.set(key, header);
  }
  return header;
}

/**
 * RFC 7515 compact serialization, signed with node:crypto: ES256 is ECDSA P-256 with SHA-256, its
 * signature the 64-byte R || S (RFC 7518 §3.4), which `dsaEncoding: 'ieee-p1363'` produces (jose signs
 * through WebCrypto, which costs twice the CPU). Signed on the calling thread, about 40 µs: a server
 * process is meant to have a core of its own (one process per core), where handing the signature to the
 * thread pool only adds two thread switches to it (`npm run bench:token`, the server on one core:
 * client credentials went from 1.40x oidc-provider's tokens/s signed on the pool to 1.74x signed here).
 */
export function signJwtAccessToken(claims: AccessTokenClaims, key: AccessTokenSigner): Promise<string> {
  if (key.alg !== SIGNING_ALG) return Promise.reject(new Error(`Access tokens are signed with ${SIGNING_ALG}, not ${key.alg}`));
  const { iss, aud, sub, client_id, jti, scope, iat, exp, reg, rev } = claims;
  const payload = Buffer.from(JSON.stringify({ iss, aud, sub, client_id, jti, scope, iat, exp, reg, rev })).toString('base64url');
  const input = `${encodedHeader(key)}.${payload}`;
  try {
    const signature = sign('sha256', Buffer.from(input), { key: key.keyObject, dsaEncoding: 'ieee-p1363' });
    return Promise.resolve(`${input}.${signature.toString('base64url')}`);
  } catch (error) {
    return Promise.reject(error as Error);
  }
}

/** A client_id at its longest (the registration's rule): the longest `client_id`, and `sub` of a client's own token. */
const LONGEST_CLIENT_ID = 'x'.repeat(128);
/** Seconds since the epoch with as many digits as any time this server will stamp (until the year 2286). */
const MAX_SECONDS = 9_999_999_999;
/** A kid as long as every key's: an RFC 7638 thumbprint, SHA-256 in base64url. */
const THUMBPRINT_LENGTH = 43;

/**
 * A length no access token this server signs exceeds: one signed with a key made for the purpose, carrying
 * `scopes` all at once (every scope it knows), client id and subject at their longest, and the
 * registration and revocation claims of a client's token beside them. Opaque tokens are far shorter.
 */
export async function longestAccessToken(issuer: string, scopes: readonly string[], id: string): Promise<number> {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const claims: AccessTokenClaims = {
    iss: issuer,
    aud: issuer,
    sub: LONGEST_CLIENT_ID,
    client_id: LONGEST_CLIENT_ID,
    jti: id,
    scope: [...new Set(scopes)].join(' '),
    iat: MAX_SECONDS,
    exp: MAX_SECONDS,
    reg: id,
    rev: Number.MAX_SAFE_INTEGER,
  };
  return (await signJwtAccessToken(claims, { kid: 'k'.repeat(THUMBPRINT_LENGTH), alg: SIGNING_ALG, keyObject: privateKey })).length;
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
  if (!isCanonical(token)) throw new InvalidTokenError('not in canonical form');
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

/**
 * Each of the three parts exactly as this server writes it: unpadded base64url whose last character carries
 * no stray bits. A base64url decoder also accepts `==` padding and a last character with its unused bits set,
 * which would give one token 32 spellings, each a separate entry of the verified-token cache and a separate
 * signature check; only the ECDSA signature's own second form, (r, n - s), remains (its jti ties both).
 */
function isCanonical(token: string): boolean {
  const parts = token.split('.');
  return parts.length === 3 && parts.every((part) => Buffer.from(part, 'base64url').toString('base64url') === part);
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
  const { iss, aud, sub, client_id, jti, scope, iat, exp, reg, rev } = payload;
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
  if (reg === undefined && rev === undefined) return { iss, aud, sub, client_id, jti, scope, iat, exp };
  if (typeof reg !== 'string' || reg === '' || typeof rev !== 'number' || !Number.isSafeInteger(rev) || rev < 0) throw new InvalidTokenError('claim types');
  return { iss, aud, sub, client_id, jti, scope, iat, exp, reg, rev };
}

function describeJoseError(error: errors.JOSEError): string {
  if (error instanceof errors.JWTExpired) return `expired (${error.claim})`;
  if (error instanceof errors.JWTClaimValidationFailed) return `${error.claim} ${error.reason}`;
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'signature invalid';
  if (error instanceof errors.JOSEAlgNotAllowed) return 'alg not allowed';
  return `malformed (${error.code})`;
}
