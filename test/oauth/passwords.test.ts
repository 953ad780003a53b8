import { describe, expect, it } from 'vitest';
import { hashPassword, verifyPassword } from '../../src/oauth/passwords.js';

describe('passwords', () => {
  it('hashes with scrypt, salts every hash and records the parameters', async () => {
    const [a, b] = await Promise.all([hashPassword('correct horse battery'), hashPassword('correct horse battery')]);
    expect(a).toMatch(/^\$scrypt\$ln=17,r=8,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    expect(a).not.toBe(b);
    expect(a).not.toContain('correct horse battery');
  });

  it('verifies the right password and rejects a wrong one', async () => {
    const stored = await hashPassword('correct horse battery');
    await expect(verifyPassword('correct horse battery', stored)).resolves.toBe(true);
    await expect(verifyPassword('correct horse batterY', stored)).resolves.toBe(false);
  });

  it('treats the same characters in different Unicode forms alike (RFC 8265 NFC)', async () => {
    const stored = await hashPassword('caf\u00e9 au lait!');
    await expect(verifyPassword('cafe\u0301 au lait!', stored)).resolves.toBe(true);
  });

  it('rejects stored strings it did not produce, including ones with exorbitant parameters', async () => {
    await expect(verifyPassword('x', 'plain-text')).resolves.toBe(false);
    const costly = '$scrypt$ln=40,r=8,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g';
    await expect(verifyPassword('x', costly)).resolves.toBe(false);
  });
});
