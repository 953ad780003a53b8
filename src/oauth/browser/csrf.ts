import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/**
 * Form tokens against cross-site request forgery (OWASP CSRF Cheat Sheet, "signed double-submit"): a
 * form's token is an HMAC over its purpose and the browser cookie the form was rendered for, keyed from
 * KEY_ENCRYPTION_SECRET. A forged form from another site cannot know it, a token from another browser or
 * for another form does not verify, and nothing needs storing.
 */
export class CsrfTokens {
  readonly #key: Buffer;

  constructor(keyEncryptionSecret: string) {
    this.#key = Buffer.from(hkdfSync('sha256', keyEncryptionSecret, 'portcullis/csrf', 'form token v1', 32));
  }

  issue(browser: string, purpose: string): string {
    return createHmac('sha256', this.#key).update(`${purpose}\n${browser}`).digest('base64url');
  }

  verify(token: string | undefined, browser: string | null, purpose: string): boolean {
    if (token === undefined || browser === null) return false;
    const expected = Buffer.from(this.issue(browser, purpose));
    const actual = Buffer.from(token);
    return actual.length === expected.length && timingSafeEqual(actual, expected);
  }
}
