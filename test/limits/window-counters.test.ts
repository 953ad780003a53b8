import { describe, expect, it } from 'vitest';
import { RateLimitPolicy, WindowCounters } from '../../src/limits/rate-limit.js';

describe('WindowCounters: fixed windows counted in this process', () => {
  it('counts a key within its window and opens a new one when it ends', () => {
    const counters = new WindowCounters(1000);
    const start = Date.now();
    expect(counters.take('a', 1, start)).toEqual({ points: 1, msLeft: 1000 });
    expect(counters.take('a', 3, start + 400)).toEqual({ points: 4, msLeft: 600 });
    expect(counters.take('b', 1, start + 400)).toEqual({ points: 1, msLeft: 1000 });
    // The window opened by the first point ends 1000 ms later, whatever came in between.
    expect(counters.take('a', 1, start + 1000)).toEqual({ points: 1, msLeft: 1000 });
  });

  it('gives points back within the window only, never below zero', () => {
    const counters = new WindowCounters(1000);
    const start = Date.now();
    counters.take('a', 3, start);
    counters.give('a', 2, start + 10);
    expect(counters.take('a', 1, start + 20).points).toBe(2);
    counters.give('a', 10, start + 30);
    expect(counters.take('a', 1, start + 40).points).toBe(1);
    // After the window: nothing to give back, and the next point opens a fresh window.
    counters.give('a', 1, start + 2000);
    expect(counters.take('a', 1, start + 2000).points).toBe(1);
  });

  it('keeps only the keys of the last two windows: ended windows are swept', () => {
    const counters = new WindowCounters(1000);
    const start = Date.now();
    for (let i = 0; i < 500; i++) counters.take(`address-${i}`, 1, start);
    expect(counters.size).toBe(500);
    // A window later, one request sweeps every ended window but its own key's.
    counters.take('late', 1, start + 2500);
    expect(counters.size).toBe(1);
  });

  it('forgets a key on delete', () => {
    const counters = new WindowCounters(1000);
    counters.take('a', 5);
    counters.delete('a');
    expect(counters.take('a', 1).points).toBe(1);
  });
});

describe('RateLimitPolicy on in-process counters', () => {
  it('answers synchronously, allows up to the budget, then refuses with the time left', () => {
    const refused: string[] = [];
    const policy = new RateLimitPolicy('client', 2, 60, (name) => refused.push(name));
    const first = policy.take('c');
    expect(first).not.toBeInstanceOf(Promise);
    expect(first).toEqual({ allowed: true, limit: 2, remaining: 1, resetSeconds: 60, policyName: 'client', windowSeconds: 60, policyField: '"client";q=2;w=60' });
    expect(policy.take('c')).toMatchObject({ allowed: true, remaining: 0 });
    expect(policy.take('c')).toMatchObject({ allowed: false, remaining: 0, resetSeconds: 60 });
    expect(refused).toEqual(['client']);
  });

  it("judges a key against its own budget when it has one, and weighs a request's points", () => {
    const policy = new RateLimitPolicy('client', 100, 60);
    expect(policy.take('small', 1, 3)).toMatchObject({ allowed: true, limit: 3, remaining: 2, policyField: '"client";q=3;w=60' });
    expect(policy.take('small', 3, 3)).toMatchObject({ allowed: false, limit: 3, remaining: 0 });
    expect(policy.take('other', 40)).toMatchObject({ allowed: true, limit: 100, remaining: 60 });
  });

  it('refund gives a reservation back and reset forgets the key', async () => {
    const policy = new RateLimitPolicy('sign-in', 2, 60);
    await policy.consume('k');
    await policy.consume('k');
    await policy.refund('k');
    expect(await policy.consume('k')).toMatchObject({ allowed: true, remaining: 0 });
    await policy.reset('k');
    expect(await policy.consume('k')).toMatchObject({ allowed: true, remaining: 1 });
  });
});
