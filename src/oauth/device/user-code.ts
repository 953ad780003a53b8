import { randomInt } from 'node:crypto';

/**
 * RFC 8628 §6.1: twenty consonants, no vowels (no words), no look-alikes; eight of them give 20^8 ≈ 2^34.6
 * codes, shown as XXXX-XXXX. Entry ignores case, dashes and spaces (§6.1: "the characters should be easy
 * to type"); guessing is throttled per address and codes live ten minutes.
 */
export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
const LENGTH = 8;

export function generateUserCode(): string {
  let code = '';
  for (let i = 0; i < LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

/** The stored form (eight letters), or null for input that cannot be a user code. */
export function normalizeUserCode(input: string): string | null {
  if (input.length > 32) return null;
  const code = input.replace(/[\s-]/g, '').toUpperCase();
  if (code.length !== LENGTH) return null;
  for (const character of code) if (!USER_CODE_ALPHABET.includes(character)) return null;
  return code;
}

export function displayUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}
