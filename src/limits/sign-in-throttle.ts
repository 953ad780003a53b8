import { addressKey } from './address-key.js';
import { inProcessStore, RateLimitPolicy, type LimiterStore } from './rate-limit.js';

const WINDOW_SECONDS = 15 * 60;

/**
 * The budgets of failed sign-ins, each per 15 minutes (OWASP Authentication Cheat Sheet, "Account Lockout";
 * ASVS 4.0 §2.2.1 asks that no more than 100 failed attempts an hour be possible on one account).
 */
export const SIGN_IN_LIMITS = Object.freeze({
  windowSeconds: WINDOW_SECONDS,
  /** One account from one address: the limit a guesser meets first. */
  accountAddress: 5,
  /**
   * One account over all addresses: bounds distributed guessing to 80 an hour. Reaching it locks the account
   * for browsers that never signed in to it; a known device is not refused by it (it has its own budget).
   */
  account: 20,
  /** One known-device cookie, from wherever it is sent (a copied cookie does not multiply guesses). */
  knownDevice: 5,
  /** One address over all accounts and device user codes (password spraying, walking the user codes). */
  address: 30,
});

export interface SignInAttempt {
  /** The account named (an email), or null for guesses that name none (a device's user code). */
  account: string | null;
  address: string;
  /** The id of a known-device cookie verified for this account (src/oauth/browser/known-devices.ts), if any. */
  knownDevice?: string | null;
}

export type ThrottledOutcome<T> = { throttled: true; retryAfterSeconds: number } | { throttled: false; value: T | null };

type Budget = readonly [RateLimitPolicy, string];

/**
 * Brute-force throttling of passwords and user codes. Every attempt first *reserves* one failure in each of
 * its budgets — before the password is hashed — so concurrent guesses can never exceed a limit: the sixth of
 * six simultaneous guesses finds five reserved and is refused without a password check. The check then runs;
 * a wrong answer keeps its reservations (they are the failure count), a right one gives them back and clears
 * the account's failures from that address, and a check that throws gives them back (no verdict, no failure).
 * A refused attempt gives back what it reserved, so only attempts that reached the check are ever counted.
 */
export class SignInThrottle {
  readonly #address: RateLimitPolicy;
  readonly #accountAddress: RateLimitPolicy;
  readonly #account: RateLimitPolicy;
  readonly #knownDevice: RateLimitPolicy;

  /** `store`: where the failures are counted; shared by every instance (Redis) or worker, guesses are too. */
  constructor(store: LimiterStore = inProcessStore) {
    const policy = (name: string, points: number) => new RateLimitPolicy(name, points, WINDOW_SECONDS, undefined, store);
    this.#address = policy('sign-in-address', SIGN_IN_LIMITS.address);
    this.#accountAddress = policy('sign-in-account-address', SIGN_IN_LIMITS.accountAddress);
    this.#account = policy('sign-in-account', SIGN_IN_LIMITS.account);
    this.#knownDevice = policy('sign-in-known-device', SIGN_IN_LIMITS.knownDevice);
  }

  /**
   * Runs `check` (the password or user-code check) unless a budget is spent. `check` answers null for a
   * failure and anything else for a success.
   */
  async attempt<T>(attempt: SignInAttempt, check: () => Promise<T | null>): Promise<ThrottledOutcome<T>> {
    const reserved: Budget[] = [];
    // In order, stopping at the first spent budget: a refused attempt creates no counters further down.
    for (const budget of this.#budgets(attempt)) {
      const [policy, key] = budget;
      const result = await policy.consume(key);
      reserved.push(budget);
      if (!result.allowed) {
        await giveBack(reserved);
        return { throttled: true, retryAfterSeconds: result.resetSeconds };
      }
    }
    let value: T | null;
    try {
      value = await check();
    } catch (error) {
      await giveBack(reserved);
      throw error;
    }
    if (value !== null) {
      await giveBack(reserved);
      if (attempt.account !== null) await this.#accountAddress.reset(accountAddressKey(attempt.account, attempt.address));
    }
    return { throttled: false, value };
  }

  #budgets({ account, address: raw, knownDevice }: SignInAttempt): Budget[] {
    const address = addressKey(raw);
    const budgets: Budget[] = [[this.#address, address]];
    if (account === null) return budgets;
    budgets.push([this.#accountAddress, accountAddressKey(account, address)]);
    // A browser that signed in to this account before is not locked out by guesses from elsewhere
    // (OWASP, "Slow Down Online Guessing Attacks with Device Cookies"); its own failures are bounded instead.
    budgets.push(knownDevice ? [this.#knownDevice, knownDevice] : [this.#account, normalizeAccount(account)]);
    return budgets;
  }
}

async function giveBack(budgets: readonly Budget[]): Promise<void> {
  await Promise.all(budgets.map(([policy, key]) => policy.refund(key)));
}

function accountAddressKey(account: string, address: string): string {
  return `${normalizeAccount(account)}\n${address}`;
}

/** Emails are unique regardless of case, so are their budgets. */
export function normalizeAccount(account: string): string {
  return account.trim().toLowerCase();
}
