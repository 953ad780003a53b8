import { expect } from 'vitest';
import { passwordWork, WAITING_PER_HASH } from '../../src/oauth/passwords.js';

/**
 * Fills this process's password hashing (src/oauth/passwords.ts): one hash running and every waiting place
 * taken, each held until `release`, which also gives back the concurrency the process had.
 */
export function fillPasswordWork(): { release(): Promise<void> } {
  const saved = passwordWork.concurrency;
  passwordWork.concurrency = 1;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const held = Array.from({ length: 1 + WAITING_PER_HASH }, () => passwordWork.run(() => gate));
  expect(passwordWork.load).toEqual({ running: 1, waiting: WAITING_PER_HASH });
  return {
    async release() {
      release();
      await Promise.all(held);
      passwordWork.concurrency = saved;
    },
  };
}
