import { describe, expect, it } from 'vitest';
import { digestSecret, generateLookupToken, generateSecret, LOOKUP_TOKEN, secretMatches, tokenLookupKey } from '../../src/oauth/secrets.js';

describe('secrets', () => {
  it('generates 256-bit base64url secrets that differ', () => {
    const a = generateSecret();
    const b = generateSecret();
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(a, 'base64url')).toHaveLength(32);
    expect(a).not.toBe(b);
    expect(generateSecret(48)).toMatch(/^[A-Za-z0-9_-]{64}$/);
  });

  it('never hands out the same bytes twice, across refills of its random pool', () => {
    const secrets = Array.from({ length: 1000 }, () => Buffer.from(generateSecret(), 'base64url'));
    expect(new Set(secrets.map((secret) => secret.toString('hex'))).size).toBe(1000);
    // No two secrets share a run of 8 bytes: each was drawn from bytes no other secret used.
    const runs = new Set<string>();
    for (const secret of secrets) for (let at = 0; at + 8 <= 32; at += 8) runs.add(secret.subarray(at, at + 8).toString('hex'));
    expect(runs.size).toBe(4000);
    expect(generateSecret(5000)).toMatch(/^[A-Za-z0-9_-]{6667}$/);
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

  it('makes lookup tokens whose keys sort in the order the tokens were made, and keys older tokens by their digest', () => {
    const at = Date.UTC(2026, 10, 23, 12, 0, 0, 0);
    const first = generateLookupToken(at);
    const second = generateLookupToken(at + 1);
    expect(first).toMatch(/^[0-9a-f]{12}[A-Za-z0-9_-]{43}$/);
    expect(first.slice(0, 12)).toBe(at.toString(16).padStart(12, '0'));
    expect(Buffer.from(first.slice(12), 'base64url')).toHaveLength(32);
    expect(LOOKUP_TOKEN.test(first)).toBe(true);
    expect(tokenLookupKey(first)).toBe(`${first.slice(0, 12)}${digestSecret(first)}`);
    expect(tokenLookupKey(first) < tokenLookupKey(second)).toBe(true);
    // The whole token is digested: the same random part under another time, or a changed secret, is another key.
    expect(tokenLookupKey(`${second.slice(0, 12)}${first.slice(12)}`)).not.toBe(tokenLookupKey(first));
    // A 43-character token from before the time prefix keeps its digest as its key.
    const older = generateSecret();
    expect(LOOKUP_TOKEN.test(older)).toBe(true);
    expect(tokenLookupKey(older)).toBe(digestSecret(older));
    for (const malformed of [`${first}x`, first.slice(1), `ABCDEF012345${first.slice(12)}`, '']) expect(LOOKUP_TOKEN.test(malformed)).toBe(false);
  });
});
