import { hash, randomBytes, randomFillSync, timingSafeEqual } from 'node:crypto';

/** 256 bits: the floor for every secret this server generates (client secrets, opaque and refresh tokens). */
const MIN_SECRET_BYTES = 32;

// Random bytes are drawn from the CSPRNG 4 KiB at a time (one call per 128 default secrets, not one per
// secret); every byte is handed out once and the pool never leaves this module.
const POOL_SIZE = 4096;
const pool = Buffer.alloc(POOL_SIZE);
let poolOffset = POOL_SIZE;

/** A fresh random secret, base64url without padding (43 characters for the default 32 bytes). */
export function generateSecret(bytes: number = MIN_SECRET_BYTES): string {
  if (!Number.isInteger(bytes) || bytes < MIN_SECRET_BYTES) {
    throw new RangeError(`a secret needs at least ${MIN_SECRET_BYTES} random bytes`);
  }
  if (bytes > POOL_SIZE) return randomBytes(bytes).toString('base64url');
  if (poolOffset + bytes > POOL_SIZE) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const secret = pool.toString('base64url', poolOffset, poolOffset + bytes);
  // Overwritten at once: a byte that made a secret is not left in memory for another use to find.
  pool.fill(0, poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return secret;
}

/**
 * The stored form of a generated secret: its SHA-256 digest, hex.
 *
 * A slow, salted hash (scrypt, argon2) exists to make guessing a low-entropy secret expensive. These
 * secrets carry >= 256 bits of randomness, so guessing is already infeasible and a preimage attack on
 * SHA-256 is the only way from a leaked digest back to the secret. A slow hash would add no security and
 * would cap the token endpoint's throughput; a plain digest also lets opaque tokens be looked up by an
 * indexed column. User passwords are different: they use `hashPassword` (scrypt).
 */
export function digestSecret(secret: string): string {
  // The one-shot form: a third of createHash's cost, on every token request (the client secret, the token).
  return hash('sha256', secret, 'hex');
}

/**
 * A bearer token found by its stored key (an opaque access token, a refresh token): 12 hex digits of the
 * millisecond it was made, then 32 random bytes, base64url (55 characters). Tokens made before this shape
 * existed are the 32 random bytes alone (43 characters) and are still accepted.
 */
export const LOOKUP_TOKEN = /^(?:[0-9a-f]{12})?[A-Za-z0-9_-]{43}$/;

const TIME_PREFIX_LENGTH = 12;

export function generateLookupToken(now: number = Date.now()): string {
  return `${now.toString(16).padStart(TIME_PREFIX_LENGTH, '0')}${generateSecret()}`;
}

/**
 * The stored key of a token of LOOKUP_TOKEN's shape: its time prefix, then the digest of the whole token.
 * Keys are thereby in creation order, so each new row lands on the last pages of the key's index, and a
 * commit writes those few pages rather than one random page per token (a digest alone is random). The
 * prefix tells only when the token was made; a presented token is found only if it is the whole token.
 * A 43-character token's key is its digest, as it always was.
 */
export function tokenLookupKey(token: string): string {
  const digest = digestSecret(token);
  return token.length > 43 ? `${token.slice(0, TIME_PREFIX_LENGTH)}${digest}` : digest;
}

/** Whether `secret` matches a stored digest, compared in constant time. */
export function secretMatches(secret: string, digest: string): boolean {
  const actual = Buffer.from(digestSecret(secret), 'utf8');
  const expected = Buffer.from(digest, 'utf8');
  // Compare equal-length buffers whatever happens so that a malformed digest costs the same time.
  const same = timingSafeEqual(actual, expected.length === actual.length ? expected : actual);
  return same && expected.length === actual.length;
}
