import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * User passwords are chosen by people, so they are stretched with scrypt (memory-hard, RFC 7914).
 * Parameters follow the OWASP Password Storage Cheat Sheet minimum: N = 2^17, r = 8, p = 1 (128 MiB).
 * The stored string carries its parameters and salt in the PHC string format, so the cost can be
 * raised later without breaking existing hashes:
 *
 *   $scrypt$ln=17,r=8,p=1$<salt base64>$<hash base64>
 */
const PARAMS = { ln: 17, r: 8, p: 1 } as const;
const SALT_BYTES = 16;
const KEY_BYTES = 32;
/** Upper bounds accepted when reading a stored hash, so a corrupted row cannot exhaust memory. */
const MAX_LN = 20;
const MAX_R = 32;
const MAX_P = 16;

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const hash = await deriveKey(password, salt, PARAMS.ln, PARAMS.r, PARAMS.p);
  return `$scrypt$ln=${PARAMS.ln},r=${PARAMS.r},p=${PARAMS.p}$${encodeBase64(salt)}$${encodeBase64(hash)}`;
}

/** False for a wrong password and for a stored string this module did not produce. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parsed = parseStored(stored);
  if (!parsed) return false;
  const hash = await deriveKey(password, parsed.salt, parsed.ln, parsed.r, parsed.p, parsed.hash.length);
  return timingSafeEqual(hash, parsed.hash);
}

interface StoredHash {
  ln: number;
  r: number;
  p: number;
  salt: Buffer;
  hash: Buffer;
}

function parseStored(stored: string): StoredHash | null {
  const match = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/.exec(stored);
  if (!match) return null;
  const [ln, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (ln < 1 || ln > MAX_LN || r < 1 || r > MAX_R || p < 1 || p > MAX_P) return null;
  const salt = Buffer.from(match[4]!, 'base64');
  const hash = Buffer.from(match[5]!, 'base64');
  if (salt.length < SALT_BYTES || hash.length < KEY_BYTES) return null;
  return { ln, r, p, salt, hash };
}

function deriveKey(password: string, salt: Buffer, ln: number, r: number, p: number, length = KEY_BYTES): Promise<Buffer> {
  const N = 2 ** ln;
  const options: ScryptOptions = { N, r, p, maxmem: 256 * N * r + 1024 * 1024 };
  // RFC 8265 §4.2 (OpaqueString): compare passwords in Unicode NFC, so the same characters typed on
  // different keyboards or platforms hash alike.
  const input = Buffer.from(password.normalize('NFC'), 'utf8');
  return new Promise((resolve, reject) => {
    scrypt(input, salt, length, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

/** PHC strings use standard base64 without padding. */
function encodeBase64(bytes: Buffer): string {
  return bytes.toString('base64').replace(/=+$/, '');
}
