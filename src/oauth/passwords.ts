import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { defaultPasswordHashConcurrency } from '../config/config.js';
import { ApiError } from '../errors/registry.js';

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
  return passwordWork.run(
    () =>
      new Promise<Buffer>((resolve, reject) => {
        scrypt(input, salt, length, options, (error, key) => (error ? reject(error) : resolve(key)));
      }),
  );
}

/** Hashes that may wait for each one running, before more are refused. */
export const WAITING_PER_HASH = 8;

/**
 * The password hashes of one process. A hash is the most expensive work anyone can ask of this server without
 * credentials (a sign-in or a password grant: 128 MiB and a quarter to half a second of a core each), and it
 * runs on libuv's thread pool, on the cores that serve every other request. The sign-in throttle bounds
 * guesses per address and account, not over all of them: many addresses at once could keep every core
 * hashing. So at most `concurrency` hashes run at once and WAITING_PER_HASH times as many wait, in order;
 * beyond that an attempt is refused at once with 503 UNAVAILABLE and the Retry-After of every 503, before any work (and a
 * sign-in refused so does not count as a failure: the throttle gives back what a check that throws
 * reserved). Memory for hashing stays at `concurrency` x 128 MiB.
 */
export class PasswordWork {
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(public concurrency: number) {}

  /** Hashes running and waiting now. */
  get load(): { running: number; waiting: number } {
    return { running: this.#running, waiting: this.#waiting.length };
  }

  run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#running < this.concurrency) {
      this.#running++;
      return this.#execute(work);
    }
    if (this.#waiting.length >= this.concurrency * WAITING_PER_HASH) {
      return Promise.reject(new ApiError('UNAVAILABLE', 'Too many passwords are being checked at the moment; retry shortly.'));
    }
    // The place of a hash that ends is handed to the next in line, never freed in between.
    return new Promise<void>((resolve) => this.#waiting.push(resolve)).then(() => this.#execute(work));
  }

  #execute<T>(work: () => Promise<T>): Promise<T> {
    let running: Promise<T>;
    try {
      running = work();
    } catch (error) {
      running = Promise.reject(error);
    }
    return running.finally(() => {
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    });
  }
}

/**
 * This process's hashing: half the cores, at least one hash at a time, until the server sets it from its
 * configuration (PASSWORD_HASH_CONCURRENCY, which also divides the cores among WORKERS).
 */
export const passwordWork = new PasswordWork(defaultPasswordHashConcurrency(1));

/** PHC strings use standard base64 without padding. */
function encodeBase64(bytes: Buffer): string {
  return bytes.toString('base64').replace(/=+$/, '');
}
