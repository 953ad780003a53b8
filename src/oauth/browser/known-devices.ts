import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { normalizeAccount } from '../../limits/sign-in-throttle.js';
import { readCookie, serializeCookie, type CookieJar } from './cookies.js';

/** How long a browser stays known to an account after its last successful sign-in there. */
export const KNOWN_DEVICE_SECONDS = 90 * 86400;
const EXPIRY_CHARS = 8;
const ID_CHARS = 22;
const MAC_CHARS = 43;

/**
 * Device cookies (OWASP, "Slow Down Online Guessing Attacks with Device Cookies"): a browser that signed in
 * to an account successfully gets a cookie bound to that account, so that a lock caused by guesses from
 * elsewhere does not lock its owner out. The value is the expiry (8 hex digits, epoch seconds), a random
 * id (the device's own failure budget is kept under it) and an HMAC over both, the account and the
 * account's credential stamp (user-credentials.ts), keyed from KEY_ENCRYPTION_SECRET as the CSRF tokens
 * are: nothing is stored, the account is not readable from the cookie, a cookie for one account proves
 * nothing for another, and a password change ends every cookie issued before it (someone who once knew the
 * old password cannot keep device budgets to guess the new one). One account per browser: the last one
 * signed in to.
 */
export class KnownDevices {
  readonly #key: Buffer;

  constructor(
    keyEncryptionSecret: string,
    private readonly jar: CookieJar,
    private readonly clock: () => number = Date.now,
  ) {
    this.#key = Buffer.from(hkdfSync('sha256', keyEncryptionSecret, 'portcullis/known-device', 'device cookie v1', 32));
  }

  /** The Set-Cookie that makes this browser known to `account` with its current credential stamp (after a successful sign-in). */
  remember(account: string, credentialStamp: string): string {
    const expiry = Math.floor(this.clock() / 1000) + KNOWN_DEVICE_SECONDS;
    const payload = `${expiry.toString(16).padStart(EXPIRY_CHARS, '0')}${randomBytes(16).toString('base64url')}`;
    return serializeCookie(this.jar, this.jar.device, `${payload}${this.#mac(payload, account, credentialStamp)}`, KNOWN_DEVICE_SECONDS);
  }

  /** Whether the request carries a device cookie at all (worth looking the account's stamp up for). */
  presented(cookieHeader: string | undefined): boolean {
    return readCookie(cookieHeader, this.jar.device) !== null;
  }

  /** `recognize` against the account's current stamp, looked up (`stampOf`) only when a device cookie came. */
  async recognizeCurrent(cookieHeader: string | undefined, account: string, stampOf: (account: string) => Promise<string | null>): Promise<string | null> {
    if (account === '' || !this.presented(cookieHeader)) return null;
    return this.recognize(cookieHeader, account, await stampOf(account));
  }

  /**
   * The device's id when the request carries a live device cookie for `account` issued under its current
   * credential stamp, else null (also when the stamp is null: no such account).
   */
  recognize(cookieHeader: string | undefined, account: string, credentialStamp: string | null): string | null {
    const value = readCookie(cookieHeader, this.jar.device);
    if (credentialStamp === null || value === null || value.length !== EXPIRY_CHARS + ID_CHARS + MAC_CHARS) return null;
    const payload = value.slice(0, EXPIRY_CHARS + ID_CHARS);
    const expected = Buffer.from(this.#mac(payload, account, credentialStamp));
    const actual = Buffer.from(value.slice(EXPIRY_CHARS + ID_CHARS));
    if (!timingSafeEqual(actual, expected)) return null;
    const expiry = Number.parseInt(payload.slice(0, EXPIRY_CHARS), 16);
    return expiry * 1000 > this.clock() ? payload.slice(EXPIRY_CHARS) : null;
  }

  #mac(payload: string, account: string, credentialStamp: string): string {
    return createHmac('sha256', this.#key).update(`${payload}\n${normalizeAccount(account)}\n${credentialStamp}`).digest('base64url');
  }
}
