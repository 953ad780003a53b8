import { describe, expect, it } from 'vitest';
import { ClusterCounters, countedBy, LEASE_POINTS, PrimaryCounters, type CountersChannel } from '../../src/cluster/cluster-counters.js';
import { RateLimitPolicy } from '../../src/limits/rate-limit.js';

/** A worker's IPC channel wired to a primary in this process; `answering` false: the primary never answers. */
function channelTo(primary: PrimaryCounters, options: { answering?: boolean; connected?: boolean } = {}) {
  const sent: unknown[] = [];
  let deliver: (value: unknown) => void = () => {};
  const channel: CountersChannel = {
    send(message, done) {
      if (options.connected === false) return false;
      sent.push(message);
      if (options.answering !== false) {
        // Across a process boundary: the answer arrives later, as a message.
        setImmediate(() => {
          deliver({ portcullisCounters: 'answer', id: message.id, answers: primary.answer(message.operations) });
          done(null);
        });
      }
      return true;
    },
    onMessage(handler) {
      deliver = handler;
    },
  };
  return { channel, sent };
}

describe('PrimaryCounters: the budgets of the workers, counted in the primary', () => {
  it('counts the keys of each policy in their own windows, gives points back and forgets a key', () => {
    const primary = new PrimaryCounters();
    const now = Date.now();
    const endsAt = now + 60_000;
    expect(
      primary.answer(
        [
          ['take', 'client', 60_000, 'c1', 1, 100, 0],
          ['take', 'client', 60_000, 'c1', 3, 100, 0],
          ['take', 'user', 60_000, 'c1', 1, 100, 0],
          ['give', 'client', 60_000, 'c1', 1, 0],
          ['take', 'client', 60_000, 'c1', 1, 100, 0],
          ['forget', 'client', 60_000, 'c1'],
          ['take', 'client', 60_000, 'c1', 1, 100, 0],
        ],
        now,
      ),
    ).toEqual([
      [1, endsAt, 0],
      [4, endsAt, 0],
      [1, endsAt, 0],
      [3, 0, 0],
      [4, endsAt, 0],
      [0, 0, 0],
      [1, endsAt, 0],
    ]);
    // A window ends 60 s after its first point.
    expect(primary.answer([['take', 'client', 60_000, 'c1', 1, 100, 0]], now + 60_000)).toEqual([[1, endsAt + 60_000, 0]]);
  });

  it('leases at most what was asked and a 64th of what the budget has left, counted as spent; never a budget under 64', () => {
    const primary = new PrimaryCounters();
    const now = Date.now();
    const endsAt = now + 1000;
    expect(primary.answer([['take', 'client', 1000, 'big', 1, 1_000_000, 32]], now)).toEqual([[33, endsAt, 32]]);
    // (1000 - 34) / 64 = 15 points.
    expect(primary.answer([['take', 'client', 1000, 'mid', 34, 1000, 32]], now)).toEqual([[49, endsAt, 15]]);
    expect(primary.answer([['take', 'client', 1000, 'small', 1, 63, 32]], now)).toEqual([[1, endsAt, 0]]);
    // Spent beyond the budget (a refused request): nothing to lease.
    expect(primary.answer([['take', 'client', 1000, 'small', 70, 63, 32]], now)).toEqual([[71, endsAt, 0]]);
  });

  it('gives a lease back to the window it was taken from only, never to the one that followed', () => {
    const primary = new PrimaryCounters();
    const now = Date.now();
    const [, endsAt, leased] = primary.answer([['take', 'client', 1000, 'k', 1, 1_000_000, 32]], now)[0]!;
    expect(leased).toBe(32);
    expect(primary.answer([['give', 'client', 1000, 'k', 30, endsAt]], now + 10)).toEqual([[3, 0, 0]]);
    primary.answer([['take', 'client', 1000, 'k', 1, 1_000_000, 0]], endsAt);
    expect(primary.answer([['give', 'client', 1000, 'k', 2, endsAt]], endsAt + 1)).toEqual([[1, 0, 0]]);
  });

  it('answers what is not an operation of this program as an empty window, without throwing', () => {
    const primary = new PrimaryCounters();
    expect(
      primary.answer([
        null,
        ['take', 'client', 0, 'c', 1, 10, 0],
        ['drop', 'client', 1000, 'c', 1],
        ['take', 'client', 1000, 'c', Number.NaN, 10, 0],
        ['take', 'client', 1000, 'c', 1, 10, -5],
        ['take', 'client', 1000, 'c', 1],
        ['give', 'client', 1000, 'c', -3, 0],
        'x',
      ]),
    ).toEqual(Array(8).fill([0, 0, 0]));
  });
});

describe('ClusterCounters: the budgets of a worker, one round trip per event-loop turn', () => {
  it('sends the operations of one turn in one message and answers each in order', async () => {
    const primary = new PrimaryCounters();
    const { channel, sent } = channelTo(primary);
    const counters = new ClusterCounters(channel, 1000);
    const answers = await Promise.all([
      counters.ask(['take', 'client', 60_000, 'a', 1, 100, 0]),
      counters.ask(['take', 'client', 60_000, 'a', 2, 100, 0]),
      counters.ask(['take', 'user', 60_000, 'u', 5, 100, 0]),
    ]);
    expect(answers.map(([points]) => points)).toEqual([1, 3, 5]);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ portcullisCounters: 'ask', operations: [['take', 'client', 60_000, 'a', 1, 100, 0], ['take', 'client', 60_000, 'a', 2, 100, 0], ['take', 'user', 60_000, 'u', 5, 100, 0]] });
    // The next turn's operations leave in a message of their own.
    expect((await counters.ask(['take', 'client', 60_000, 'a', 1, 100, 0]))[0]).toBe(4);
    expect(sent).toHaveLength(2);
    expect(counters.waiting).toBe(0);
  });

  it('fails the operations of a turn when the primary does not answer in time, or there is no channel', async () => {
    const silent = new ClusterCounters(channelTo(new PrimaryCounters(), { answering: false }).channel, 50);
    await expect(silent.ask(['take', 'client', 60_000, 'a', 1, 100, 0])).rejects.toThrow('the primary did not answer in time');
    expect(silent.waiting).toBe(0);
    const alone = new ClusterCounters(channelTo(new PrimaryCounters(), { connected: false }).channel, 50);
    await expect(alone.ask(['take', 'client', 60_000, 'a', 1, 100, 0])).rejects.toThrow('no IPC channel to the primary');
  });

  it('lets two workers draw on one budget through the primary, and a policy count in its process when the primary is silent', async () => {
    const primary = new PrimaryCounters();
    const workerA = new ClusterCounters(channelTo(primary).channel, 1000);
    const workerB = new ClusterCounters(channelTo(primary).channel, 1000);
    const onA = new RateLimitPolicy('client', 3, 60, undefined, countedBy(() => workerA));
    const onB = new RateLimitPolicy('client', 3, 60, undefined, countedBy(() => workerB));
    expect(await onA.consume('c')).toMatchObject({ allowed: true, remaining: 2 });
    expect(await onB.consume('c')).toMatchObject({ allowed: true, remaining: 1 });
    expect(await onA.consume('c')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await onB.consume('c')).toMatchObject({ allowed: false, remaining: 0 });
    await onA.refund('c');
    expect(await onB.consume('c')).toMatchObject({ allowed: false });

    // The primary stopped answering: the budget is counted in this process, and still enforced.
    const silent = new RateLimitPolicy('client', 1, 60, undefined, countedBy(() => new ClusterCounters(channelTo(primary, { answering: false }).channel, 20)));
    expect(await silent.consume('d')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await silent.consume('d')).toMatchObject({ allowed: false });
  });
});

describe('Leases: a busy key spends points of its budget in the worker', () => {
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('answers a busy key from its lease without a message, the remaining points counting down', async () => {
    const primary = new PrimaryCounters();
    const { channel, sent } = channelTo(primary);
    const worker = new ClusterCounters(channel, 1000);
    const policy = new RateLimitPolicy('client', 1_000_000, 60, undefined, countedBy(() => worker, 1000));
    // A key's first request asks the primary for its point alone; the next, a busy key's, leases more.
    expect(await policy.consume('k')).toMatchObject({ allowed: true, remaining: 999_999 });
    expect(await policy.consume('k')).toMatchObject({ allowed: true, remaining: 999_998 });
    expect(sent).toHaveLength(2);
    expect((sent[1] as { operations: unknown[] }).operations).toEqual([['take', 'client', 60_000, 'k', 1, 1_000_000, LEASE_POINTS]]);
    for (let i = 1; i <= LEASE_POINTS; i++) {
      const answer = policy.take('k');
      // Answered at once, not as a promise.
      expect(answer).toMatchObject({ allowed: true, remaining: 999_998 - i, limit: 1_000_000 });
    }
    expect(sent).toHaveLength(2);
    // The lease spent: the primary again, for the request and a new lease.
    expect(policy.take('k')).toBeInstanceOf(Promise);
    expect(sent).toHaveLength(2);
    await pause(5);
    expect(sent).toHaveLength(3);
  });

  it('never lets the workers admit more than the budget, and gives back what a worker did not spend', async () => {
    const primary = new PrimaryCounters();
    const workerA = new ClusterCounters(channelTo(primary).channel, 1000);
    const workerB = new ClusterCounters(channelTo(primary).channel, 1000);
    const onA = new RateLimitPolicy('client', 200, 60, undefined, countedBy(() => workerA, 40));
    const onB = new RateLimitPolicy('client', 200, 60, undefined, countedBy(() => workerB, 40));
    expect(await onA.consume('k')).toMatchObject({ allowed: true, remaining: 199 });
    // Busy on A: leased (200 - 2) / 64 = 3 points, counted as spent.
    expect(await onA.consume('k')).toMatchObject({ allowed: true, remaining: 198 });
    let allowedOnB = 0;
    while ((await onB.consume('k')).allowed) allowedOnB++;
    expect(allowedOnB).toBe(195);
    // A still holds 3 points: it spends them, and no more.
    for (let i = 0; i < 3; i++) expect(onA.take('k')).toMatchObject({ allowed: true });
    expect(await onA.consume('k')).toMatchObject({ allowed: false, remaining: 0 });
    expect(2 + allowedOnB + 3).toBe(200);

    // Leased and never spent: back to the budget within two lease periods.
    const primary2 = new PrimaryCounters();
    const onC = new RateLimitPolicy('client', 200, 60, undefined, countedBy(() => new ClusterCounters(channelTo(primary2).channel, 1000), 40));
    const onD = new RateLimitPolicy('client', 200, 60, undefined, countedBy(() => new ClusterCounters(channelTo(primary2).channel, 1000), 40));
    await onC.consume('k');
    await onC.consume('k');
    let allowedOnD = 0;
    while ((await onD.consume('k')).allowed) allowedOnD++;
    expect(allowedOnD).toBe(195);
    await pause(100);
    // 200 spent, 1 refused (it counts), 3 given back: two more.
    expect(await onD.consume('k')).toMatchObject({ allowed: true, remaining: 1 });
    expect(await onD.consume('k')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await onD.consume('k')).toMatchObject({ allowed: false });
  });

  it('takes a refund into the lease, and forgets the lease with the key', async () => {
    const primary = new PrimaryCounters();
    const { channel, sent } = channelTo(primary);
    const policy = new RateLimitPolicy('client', 1_000_000, 60, undefined, countedBy(() => new ClusterCounters(channel, 1000), 1000));
    await policy.consume('k');
    await policy.consume('k');
    expect(policy.take('k')).toMatchObject({ remaining: 999_997 });
    await policy.refund('k');
    expect(sent).toHaveLength(2);
    expect(policy.take('k')).toMatchObject({ remaining: 999_997 });
    await policy.reset('k');
    expect(sent).toHaveLength(3);
    // Forgotten: the next request asks the primary and opens a new window.
    expect(await policy.consume('k')).toMatchObject({ allowed: true, remaining: 999_999 });
  });

  it('never leases a budget too small to share: each request asks the primary', async () => {
    const primary = new PrimaryCounters();
    const { channel, sent } = channelTo(primary);
    const policy = new RateLimitPolicy('client', 63, 60, undefined, countedBy(() => new ClusterCounters(channel, 1000), 1000));
    for (let i = 0; i < 10; i++) expect(await policy.consume('k')).toMatchObject({ allowed: true, remaining: 62 - i });
    expect(sent).toHaveLength(10);
  });
});
