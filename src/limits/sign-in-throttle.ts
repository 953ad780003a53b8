import { RateLimitPolicy } from './rate-limit.js';

/** Failed sign-ins an account may have in a window before it is refused without checking (OWASP ASVS 2.2.1). */
const ACCOUNT_FAILURES = 5;
/** Failed sign-ins one address may have in a window, over all accounts (password spraying). */
const ADDRESS_FAILURES = 30;
const WINDOW_SECONDS = 15 * 60;

export interface ThrottleVerdict {
  allowed: boolean;
  retryAfterSeconds: number;
}

/**
 * Brute-force throttling of passwords and user codes, per account and per address. Only failures count:
 * a user who signs in correctly is never slowed, and a success clears the account's count. A throttled
 * attempt is refused before the password is hashed, so a flood costs no scrypt work.
 */
export class SignInThrottle {
  readonly #account = new RateLimitPolicy('sign-in-account', ACCOUNT_FAILURES, WINDOW_SECONDS);
  readonly #address = new RateLimitPolicy('sign-in-address', ADDRESS_FAILURES, WINDOW_SECONDS);

  async check(account: string | null, address: string): Promise<ThrottleVerdict> {
    const [byAddress, byAccount] = await Promise.all([
      this.#address.peek(address),
      account === null ? null : this.#account.peek(normalize(account)),
    ]);
    const refused = [byAddress, byAccount].filter((result) => result !== null && !result.allowed);
    if (refused.length === 0) return { allowed: true, retryAfterSeconds: 0 };
    return { allowed: false, retryAfterSeconds: Math.max(...refused.map((result) => result!.resetSeconds)) };
  }

  async failed(account: string | null, address: string): Promise<void> {
    await Promise.all([this.#address.consume(address), account === null ? null : this.#account.consume(normalize(account))]);
  }

  async succeeded(account: string): Promise<void> {
    await this.#account.reset(normalize(account));
  }
}

/** Emails are unique regardless of case, so are their budgets. */
function normalize(account: string): string {
  return account.trim().toLowerCase();
}
