import { describe, expect, it } from 'vitest';
import { ApiError, UNAVAILABLE_RETRY_AFTER_SECONDS } from '../../src/errors/registry.js';
import { PasswordWork, WAITING_PER_HASH } from '../../src/oauth/passwords.js';

/** A piece of work that runs until the test ends it. */
function held<T = string>(): { work: () => Promise<T>; started: () => boolean; finish(value: T): void; fail(error: Error): void } {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  let started = false;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return {
    work: () => {
      started = true;
      return promise;
    },
    started: () => started,
    finish: resolve,
    fail: reject,
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('password work', () => {
  it('runs at most `concurrency` hashes at once and starts the waiting ones in order as places free up', async () => {
    const work = new PasswordWork(2);
    const pieces = Array.from({ length: 5 }, () => held());
    const results = pieces.map((piece) => work.run(piece.work));
    await turn();
    expect(pieces.map((piece) => piece.started())).toEqual([true, true, false, false, false]);
    expect(work.load).toEqual({ running: 2, waiting: 3 });
    pieces[1]!.finish('b');
    await turn();
    expect(pieces.map((piece) => piece.started())).toEqual([true, true, true, false, false]);
    expect(work.load).toEqual({ running: 2, waiting: 2 });
    pieces[0]!.finish('a');
    pieces[2]!.finish('c');
    await turn();
    expect(pieces.map((piece) => piece.started())).toEqual([true, true, true, true, true]);
    pieces[3]!.finish('d');
    pieces[4]!.finish('e');
    await expect(Promise.all(results)).resolves.toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(work.load).toEqual({ running: 0, waiting: 0 });
  });

  it(`refuses at once, before any work, with 503 UNAVAILABLE and Retry-After once ${WAITING_PER_HASH} per place are waiting`, async () => {
    const work = new PasswordWork(1);
    const pieces = Array.from({ length: 1 + WAITING_PER_HASH }, () => held());
    const admitted = pieces.map((piece) => work.run(piece.work));
    const refusedWork = held();
    const refused = work.run(refusedWork.work);
    await expect(refused).rejects.toBeInstanceOf(ApiError);
    const error = (await refused.catch((e: unknown) => e)) as ApiError;
    expect({ code: error.code, status: error.status, message: error.message, headers: error.headers }).toEqual({
      code: 'UNAVAILABLE',
      status: 503,
      message: 'Too many passwords are being checked at the moment; retry shortly.',
      headers: { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) },
    });
    expect(refusedWork.started()).toBe(false);
    expect(work.load).toEqual({ running: 1, waiting: WAITING_PER_HASH });
    // Once one ends, one more may wait again.
    pieces[0]!.finish('done');
    await turn();
    const later = held();
    const accepted = work.run(later.work);
    expect(work.load).toEqual({ running: 1, waiting: WAITING_PER_HASH });
    for (const piece of pieces.slice(1)) {
      await turn();
      piece.finish('done');
    }
    await turn();
    later.finish('later');
    await expect(accepted).resolves.toBe('later');
    await Promise.all(admitted);
    expect(work.load).toEqual({ running: 0, waiting: 0 });
  });

  it('hands an ended hash its place to the next in line: nothing asked for meanwhile gets ahead of it', async () => {
    const work = new PasswordWork(1);
    const first = held();
    const second = held();
    const third = held();
    void work.run(first.work);
    void work.run(second.work);
    first.finish('a');
    // Asked for in the same turn the first ended, before the second could start: it must wait its turn.
    await Promise.resolve();
    void work.run(third.work);
    await turn();
    expect([second.started(), third.started()]).toEqual([true, false]);
    expect(work.load).toEqual({ running: 1, waiting: 1 });
    second.finish('b');
    await turn();
    expect(third.started()).toBe(true);
    third.finish('c');
    await turn();
    expect(work.load).toEqual({ running: 0, waiting: 0 });
  });

  it('frees the place of a hash that fails, and of work that throws before it returns a promise', async () => {
    const work = new PasswordWork(1);
    const failing = held();
    const failed = work.run(failing.work);
    const next = held();
    const nextResult = work.run(next.work);
    failing.fail(new Error('scrypt failed'));
    await expect(failed).rejects.toThrow('scrypt failed');
    await turn();
    expect(next.started()).toBe(true);
    next.finish('ok');
    await expect(nextResult).resolves.toBe('ok');
    await expect(
      work.run(() => {
        throw new Error('thrown at once');
      }),
    ).rejects.toThrow('thrown at once');
    expect(work.load).toEqual({ running: 0, waiting: 0 });
  });
});
