import { describe, expect, it } from 'vitest';
import { digestSecret, generateSecret, secretMatches } from '../../src/oauth/secrets.js';

describe('secrets', () => {
  it('generates 256-bit base64url secrets that differ', () => {
    const a = generateSecret();
    const b = generateSecret();
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(a, 'base64url')).toHaveLength(32);
    expect(a).not.toBe(b);
    expect(generateSecret(48)).toMatch(/^[A-Za-z0-9_-]{64}$/);
  });

  it('refuses fewer than 256 bits', () => {
    expect(() => generateSecret(16)).toThrow(RangeError);
  });

  it('stores the SHA-256 digest in hex and matches only the same secret', () => {
    const secret = generateSecret();
    const digest = digestSecret(secret);
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(digestSecret('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(secretMatches(secret, digest)).toBe(true);
    expect(secretMatches(`${secret}x`, digest)).toBe(false);
    expect(secretMatches(secret, 'not-a-digest')).toBe(false);
    expect(secretMatches(secret, '')).toBe(false);
  });
});
