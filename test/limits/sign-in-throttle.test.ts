import { describe, expect, it } from 'vitest';
import { SIGN_IN_LIMITS, SignInThrottle, type SignInAttempt } from '../../src/limits/sign-in-throttle.js';

const WINDOW = SIGN_IN_LIMITS.windowSeconds;

/** A password check that is slow like scrypt: every attempt is in flight before any of them answers. */
function slowCheck<T>(answer: T | null): { check: () => Promise<T | null>; calls: () => number } {
  let calls = 0;
  return {
    check: async () => {
      calls++;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return answer;
    },
    calls: () => calls,
  };
}

function summary(outcomes: readonly { throttled: boolean }[]): { checked: number; throttled: number } {
  return { checked: outcomes.filter((o) => !o.throttled).length, throttled: outcomes.filter((o) => o.throttled).length };
}

function retryAfter(outcome: Awaited<ReturnType<SignInThrottle['attempt']>>): number {
  if (!outcome.throttled) throw new Error('expected a throttled attempt');
  return outcome.retryAfterSeconds;
}

describe('SignInThrottle', () => {
  it('lets at most 5 of 50 concurrent wrong guesses for one account from one address reach the password check', async () => {
    const throttle = new SignInThrottle();
    const wrong = slowCheck(null);
    const attempt: SignInAttempt = { account: 'victim@example.com', address: '192.0.2.1' };
    const outcomes = await Promise.all(Array.from({ length: 50 }, () => throttle.attempt(attempt, wrong.check)));
    expect(wrong.calls()).toBe(SIGN_IN_LIMITS.accountAddress);
    expect(summary(outcomes)).toEqual({ checked: 5, throttled: 45 });
    for (const outcome of outcomes.filter((o) => !o.throttled)) expect(outcome).toEqual({ throttled: false, value: null });
    // The right password is refused unchecked while the lock lasts.
    const right = slowCheck('user');
    const refused = await throttle.attempt({ ...attempt, account: 'VICTIM@example.com ' }, right.check);
    expect(right.calls()).toBe(0);
    expect(retryAfter(refused)).toBeGreaterThan(WINDOW - 10);
    expect(retryAfter(refused)).toBeLessThanOrEqual(WINDOW);
  });

  it('lets at most 20 concurrent wrong guesses for one account from 50 addresses reach the check', async () => {
    const throttle = new SignInThrottle();
    const wrong = slowCheck(null);
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => throttle.attempt({ account: 'victim@example.com', address: `198.51.100.${i}` }, wrong.check)),
    );
    expect(wrong.calls()).toBe(SIGN_IN_LIMITS.account);
    expect(summary(outcomes)).toEqual({ checked: 20, throttled: 30 });
    // An address that has never guessed meets the lock too...
    const right = slowCheck('user');
    expect((await throttle.attempt({ account: 'victim@example.com', address: '203.0.113.1' }, right.check)).throttled).toBe(true);
    expect(right.calls()).toBe(0);
    // ...but not a browser the account signed in from before.
    expect(await throttle.attempt({ account: 'victim@example.com', address: '203.0.113.1', knownDevice: 'device-a' }, right.check)).toEqual({ throttled: false, value: 'user' });
  });

  it('lets at most 30 concurrent wrong guesses from one address over many accounts reach the check', async () => {
    const throttle = new SignInThrottle();
    const wrong = slowCheck(null);
    const outcomes = await Promise.all(Array.from({ length: 60 }, (_, i) => throttle.attempt({ account: `user-${i}@example.com`, address: '192.0.2.9' }, wrong.check)));
    expect(wrong.calls()).toBe(SIGN_IN_LIMITS.address);
    expect(summary(outcomes)).toEqual({ checked: 30, throttled: 30 });
    // User codes (no account) share the address's budget.
    expect((await throttle.attempt({ account: null, address: '192.0.2.9' }, wrong.check)).throttled).toBe(true);
    expect((await throttle.attempt({ account: null, address: '192.0.2.10' }, wrong.check)).throttled).toBe(false);
  });

  it('bounds a known device by its own budgets: per account and address, and per device wherever it is sent from', async () => {
    const throttle = new SignInThrottle();
    const wrong = slowCheck(null);
    const known = { account: 'owner@example.com', knownDevice: 'device-b' };
    // From one address: the account-and-address limit.
    const here = await Promise.all(Array.from({ length: 10 }, () => throttle.attempt({ ...known, address: '192.0.2.20' }, wrong.check)));
    expect(summary(here)).toEqual({ checked: 5, throttled: 5 });
    // The same cookie copied to other addresses: the device's budget is spent too.
    const elsewhere = await Promise.all(Array.from({ length: 10 }, (_, i) => throttle.attempt({ ...known, address: `198.51.100.${i}` }, wrong.check)));
    expect(summary(elsewhere)).toEqual({ checked: 0, throttled: 10 });
    expect(wrong.calls()).toBe(5);
    // Failures of a known device do not spend the account's budget over all addresses.
    const other = slowCheck('user');
    expect(await throttle.attempt({ account: 'owner@example.com', address: '203.0.113.5' }, other.check)).toEqual({ throttled: false, value: 'user' });
  });

  it('gives the reservations back on success and clears the account’s failures from that address', async () => {
    const throttle = new SignInThrottle();
    const attempt: SignInAttempt = { account: 'user@example.com', address: '192.0.2.30' };
    for (let i = 0; i < 4; i++) expect(await throttle.attempt(attempt, slowCheck(null).check)).toEqual({ throttled: false, value: null });
    expect(await throttle.attempt(attempt, slowCheck('user').check)).toEqual({ throttled: false, value: 'user' });
    // Five more failures are possible before the lock, not one.
    const wrong = slowCheck(null);
    const outcomes = await Promise.all(Array.from({ length: 8 }, () => throttle.attempt(attempt, wrong.check)));
    expect(summary(outcomes)).toEqual({ checked: 5, throttled: 3 });
  });

  it('does not reset the account’s failures over all addresses on success: a victim signing in gives no attacker new guesses', async () => {
    const throttle = new SignInThrottle();
    const wrong = slowCheck(null);
    await Promise.all(Array.from({ length: 19 }, (_, i) => throttle.attempt({ account: 'v@example.com', address: `198.51.100.${i}` }, wrong.check)));
    expect(await throttle.attempt({ account: 'v@example.com', address: '192.0.2.40' }, slowCheck('user').check)).toEqual({ throttled: false, value: 'user' });
    const next = await Promise.all(Array.from({ length: 3 }, (_, i) => throttle.attempt({ account: 'v@example.com', address: `203.0.113.${i}` }, wrong.check)));
    expect(summary(next)).toEqual({ checked: 1, throttled: 2 });
  });

  it('gives the reservations back when the check throws: no verdict, no failure', async () => {
    const throttle = new SignInThrottle();
    const attempt: SignInAttempt = { account: 'user@example.com', address: '192.0.2.50' };
    const broken = async (): Promise<null> => {
      throw new Error('database unreachable');
    };
    for (let i = 0; i < 10; i++) await expect(throttle.attempt(attempt, broken)).rejects.toThrow('database unreachable');
    const wrong = slowCheck(null);
    const outcomes = await Promise.all(Array.from({ length: 6 }, () => throttle.attempt(attempt, wrong.check)));
    expect(summary(outcomes)).toEqual({ checked: 5, throttled: 1 });
  });

  it('counts no refused attempt: hammering a locked account from one address does not spend that address’s budget further', async () => {
    const throttle = new SignInThrottle();
    const wrong = slowCheck(null);
    const attempt: SignInAttempt = { account: 'locked@example.com', address: '192.0.2.60' };
    await Promise.all(Array.from({ length: 5 }, () => throttle.attempt(attempt, wrong.check)));
    for (let i = 0; i < 40; i++) expect((await throttle.attempt(attempt, wrong.check)).throttled).toBe(true);
    // 5 of the address's 30 are spent: 25 guesses at other accounts still reach the check.
    const others = await Promise.all(Array.from({ length: 30 }, (_, i) => throttle.attempt({ account: `other-${i}@example.com`, address: '192.0.2.60' }, wrong.check)));
    expect(summary(others)).toEqual({ checked: 25, throttled: 5 });
  });
});
