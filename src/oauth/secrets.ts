import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** 256 bits: the floor for every secret this server generates (client secrets, opaque and refresh tokens). */
const MIN_SECRET_BYTES = 32;

/** A fresh random secret, base64url without padding (43 characters for the default 32 bytes). */
export function generateSecret(bytes: number = MIN_SECRET_BYTES): string {
  if (!Number.isInteger(bytes) || bytes < MIN_SECRET_BYTES) {
    throw new RangeError(`a secret needs at least ${MIN_SECRET_BYTES} random bytes`);
  }
  return randomBytes(bytes).toString('base64url');
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

/** Whether `secret` matches a stored digest, compared in constant time. */
export function secretMatches(secret: string, digest: string): boolean {
  const actual = Buffer.from(digestSecret(secret), 'utf8');
  const expected = Buffer.from(digest, 'utf8');
  // Compare equal-length buffers whatever happens so that a malformed digest costs the same time.
  const same = timingSafeEqual(actual, expected.length === actual.length ? expected : actual);
  return same && expected.length === actual.length;
}
