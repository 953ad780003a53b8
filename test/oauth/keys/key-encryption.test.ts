import { describe, expect, it } from 'vitest';
import { decryptPrivateJwk, deriveEncryptionKey, encryptPrivateJwk, KeyDecryptionError } from '../../../src/oauth/keys/key-encryption.js';

const jwk = { kty: 'EC', crv: 'P-256', x: 'x-value', y: 'y-value', d: 'private-scalar' };

describe('key encryption', () => {
  const key = deriveEncryptionKey('a'.repeat(40));

  it('round-trips a JWK and never stores it in plaintext', () => {
    const stored = encryptPrivateJwk(jwk, 'kid-1', key);
    expect(stored).toMatch(/^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/);
    expect(stored).not.toContain('private-scalar');
    expect(decryptPrivateJwk(stored, 'kid-1', key)).toEqual(jwk);
  });

  it('uses a fresh nonce each time', () => {
    expect(encryptPrivateJwk(jwk, 'kid-1', key)).not.toBe(encryptPrivateJwk(jwk, 'kid-1', key));
  });

  it('cannot decrypt under another secret, another kid or after tampering', () => {
    const stored = encryptPrivateJwk(jwk, 'kid-1', key);
    expect(() => decryptPrivateJwk(stored, 'kid-1', deriveEncryptionKey('b'.repeat(40)))).toThrow(KeyDecryptionError);
    expect(() => decryptPrivateJwk(stored, 'kid-2', key)).toThrow(KeyDecryptionError);
    const parts = stored.split('.');
    parts[2] = `${parts[2]!.slice(0, -2)}${parts[2]!.endsWith('AA') ? 'BA' : 'AA'}`;
    expect(() => decryptPrivateJwk(parts.join('.'), 'kid-1', key)).toThrow(KeyDecryptionError);
    expect(() => decryptPrivateJwk('{"d":"x"}', 'kid-1', key)).toThrow(KeyDecryptionError);
  });
});
