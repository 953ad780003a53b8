import { describe, expect, it } from 'vitest';
import { ClusterCounters, countedBy, PrimaryCounters, type CountersChannel } from '../../src/cluster/cluster-counters.js';
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
    expect(
      primary.answer(
        [
          ['take', 'client', 60_000, 'c1', 1],
          ['take', 'client', 60_000, 'c1', 3],
          ['take', 'user', 60_000, 'c1', 1],
          ['give', 'client', 60_000, 'c1', 1],
          ['take', 'client', 60_000, 'c1', 1],
          ['forget', 'client', 60_000, 'c1', 0],
          ['take', 'client', 60_000, 'c1', 1],
        ],
        now,
      ),
    ).toEqual([
      [1, 60_000],
      [4, 60_000],
      [1, 60_000],
      [3, 0],
      [4, 60_000],
      [0, 0],
      [1, 60_000],
    ]);
    // A window ends 60 s after its first point.
    expect(primary.answer([['take', 'client', 60_000, 'c1', 1]], now + 60_000)).toEqual([[1, 60_000]]);
  });

  it('answers what is not an operation of this program as an empty window, without throwing', () => {
    const primary = new PrimaryCounters();
    expect(primary.answer([null, ['take', 'client', 0, 'c', 1], ['drop', 'client', 1000, 'c', 1], ['take', 'client', 1000, 'c', Number.NaN], 'x'])).toEqual([
      [0, 0],
      [0, 0],
      [0, 0],
      [0, 0],
      [0, 0],
    ]);
  });
});

describe('ClusterCounters: the budgets of a worker, one round trip per event-loop turn', () => {
  it('sends the operations of one turn in one message and answers each in order', async () => {
    const primary = new PrimaryCounters();
    const { channel, sent } = channelTo(primary);
    const counters = new ClusterCounters(channel, 1000);
    const answers = await Promise.all([
      counters.ask(['take', 'client', 60_000, 'a', 1]),
      counters.ask(['take', 'client', 60_000, 'a', 2]),
      counters.ask(['take', 'user', 60_000, 'u', 5]),
    ]);
    expect(answers.map(([points]) => points)).toEqual([1, 3, 5]);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ portcullisCounters: 'ask', operations: [['take', 'client', 60_000, 'a', 1], ['take', 'client', 60_000, 'a', 2], ['take', 'user', 60_000, 'u', 5]] });
    // The next turn's operations leave in a message of their own.
    expect((await counters.ask(['take', 'client', 60_000, 'a', 1]))[0]).toBe(4);
    expect(sent).toHaveLength(2);
    expect(counters.waiting).toBe(0);
  });

  it('fails the operations of a turn when the primary does not answer in time, or there is no channel', async () => {
    const silent = new ClusterCounters(channelTo(new PrimaryCounters(), { answering: false }).channel, 50);
    await expect(silent.ask(['take', 'client', 60_000, 'a', 1])).rejects.toThrow('the primary did not answer in time');
    expect(silent.waiting).toBe(0);
    const alone = new ClusterCounters(channelTo(new PrimaryCounters(), { connected: false }).channel, 50);
    await expect(alone.ask(['take', 'client', 60_000, 'a', 1])).rejects.toThrow('no IPC channel to the primary');
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
