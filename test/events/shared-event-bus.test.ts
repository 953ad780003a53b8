import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { SharedEventBus } from '../../src/events/shared-event-bus.js';
import { SignedFanout, type Refusal } from '../../src/events/signed-fanout.js';
import { RedisLink } from '../../src/redis/redis-link.js';
import { REDIS_AVAILABLE, REDIS_URL } from '../helpers/redis.js';

const quiet = { info: () => {}, warn: () => {} };
const links: RedisLink[] = [];
const rawConnections: Redis[] = [];
const SECRET = 'shared-event-bus-test-secret-0123456789';

function link(namespace = ''): RedisLink {
  const redis = new RedisLink(REDIS_URL, quiet, namespace);
  links.push(redis);
  return redis;
}

async function ready(redis: RedisLink): Promise<void> {
  for (let attempt = 0; attempt < 100 && !redis.ready; attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(redis.ready).toBe(true);
}

/** The next event of the iterator, or 'none' when nothing arrives within `ms`. */
async function nextWithin<T>(events: AsyncIterator<T>, ms: number): Promise<T | 'none'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'none'>((resolve) => (timer = setTimeout(() => resolve('none'), ms)));
  const next = events.next().then((result) => result.value as T);
  try {
    return await Promise.race([next, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Someone else who can reach Redis: records every message of a deployment's channels, and publishes what it likes. */
async function eavesdropper(namespace: string): Promise<{ recorded: { channel: string; message: string }[]; publish: (channel: string, message: string) => Promise<number> }> {
  const [listening, publishing] = [new Redis(REDIS_URL), new Redis(REDIS_URL)];
  rawConnections.push(listening, publishing);
  const recorded: { channel: string; message: string }[] = [];
  listening.on('pmessage', (_pattern: string, channel: string, message: string) => recorded.push({ channel, message }));
  await listening.psubscribe(`${namespace}:*`);
  return { recorded, publish: (channel, message) => publishing.publish(channel, message) };
}

afterEach(async () => {
  await Promise.all(links.splice(0).map((redis) => redis.close()));
  await Promise.all(rawConnections.splice(0).map((redis) => redis.quit()));
});

describe.skipIf(!REDIS_AVAILABLE)('resource events shared through Redis', () => {
  it('reach subscribers on another process once, and this process\'s own subscribers once', async () => {
    const [a, b] = [link(), link()];
    await Promise.all([ready(a), ready(b)]);
    const [busA, busB] = [new SharedEventBus(a), new SharedEventBus(b)];
    const onA = busA.subscribe('postPublished');
    const onB = busB.subscribe('postPublished');
    const comments = busB.subscribe('commentAdded');
    // Let the subscriber connections confirm their channel before publishing.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const post = { id: 'p-1', title: 'Shared', status: 'published', createdAt: '2026-11-26T00:00:00.000Z' };
    busA.publish('postPublished', post);
    expect(await nextWithin(onB, 1000)).toEqual(post);
    expect(await nextWithin(onA, 1000)).toEqual(post);
    // Delivered once each: nothing more on either side, and nothing on another topic.
    expect(await nextWithin(onA, 300)).toBe('none');
    expect(await nextWithin(onB, 300)).toBe('none');
    expect(await nextWithin(comments, 100)).toBe('none');
  });

  it('ignores messages on its channel that it could not have sent', async () => {
    const [a, publisher] = [link(), link()];
    await Promise.all([ready(a), ready(publisher)]);
    const bus = new SharedEventBus(a);
    const events = bus.subscribe('commentAdded');
    await new Promise((resolve) => setTimeout(resolve, 200));
    for (const message of ['not json', '{"origin":"x","topic":"userDeleted","payload":{}}', '{"origin":"x","topic":"commentAdded","payload":[1]}', 'null']) {
      await publisher.commands.publish('resource-events', message);
    }
    expect(await nextWithin(events, 300)).toBe('none');
    await publisher.commands.publish('resource-events', JSON.stringify({ origin: 'x', topic: 'commentAdded', payload: { id: 'c-1' } }));
    expect(await nextWithin(events, 1000)).toEqual({ id: 'c-1' });
  });

  it('keeps deployments that share one Redis apart: another namespace hears nothing', async () => {
    const [staging, production, productionToo] = [link('portcullis:staging'), link('portcullis:production'), link('portcullis:production')];
    await Promise.all([ready(staging), ready(production), ready(productionToo)]);
    const onStaging = new SharedEventBus(staging).subscribe('postPublished');
    const onProduction = new SharedEventBus(productionToo).subscribe('postPublished');
    await new Promise((resolve) => setTimeout(resolve, 200));
    new SharedEventBus(production).publish('postPublished', { id: 'p-2' });
    expect(await nextWithin(onProduction, 1000)).toEqual({ id: 'p-2' });
    expect(await nextWithin(onStaging, 300)).toBe('none');
  });

  it('delivers a signed event once however often a copy recorded from Redis is published again; fresh events still arrive', async () => {
    // A deployment of its own, so that nothing else running on this Redis is heard or disturbed.
    const namespace = `portcullis:replay-${randomUUID()}`;
    const [a, b] = [link(namespace), link(namespace)];
    const attacker = await eavesdropper(namespace);
    await Promise.all([ready(a), ready(b)]);
    const refusedOnA: Refusal[] = [];
    const refusedOnB: Refusal[] = [];
    const busA = new SharedEventBus(new SignedFanout(a, SECRET, null, (_channel, reason) => refusedOnA.push(reason)));
    const busB = new SharedEventBus(new SignedFanout(b, SECRET, null, (_channel, reason) => refusedOnB.push(reason)));
    const onA = busA.subscribe('postPublished');
    const onB = busB.subscribe('postPublished');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const post = { id: 'p-3', title: 'Later a draft', body: 'confidential once withdrawn', status: 'published' };
    busA.publish('postPublished', post);
    expect(await nextWithin(onB, 1000)).toEqual(post);
    expect(await nextWithin(onA, 1000)).toEqual(post);
    await expect.poll(() => attacker.recorded.length, { timeout: 1000, interval: 20 }).toBe(1);
    const { channel, message } = attacker.recorded[0]!;
    expect(channel).toBe(`${namespace}:resource-events`);

    // The author withdraws the post; the recorded message is published again, verbatim, three times, and
    // reaches both instances' subscribers and the eavesdropper's own.
    for (let copy = 0; copy < 3; copy++) expect(await attacker.publish(channel, message)).toBe(3);
    expect(await nextWithin(onB, 500)).toBe('none');
    expect(await nextWithin(onA, 100)).toBe('none');
    // Each instance refused every copy as one, A included: it had accepted its own message when it came back.
    expect(refusedOnB).toEqual(['replay', 'replay', 'replay']);
    expect(refusedOnA).toEqual(['replay', 'replay', 'replay']);

    // New subscriptions: a `nextWithin` that timed out left its `next()` waiting, and it would take the event.
    const [laterOnA, laterOnB] = [busA.subscribe('postPublished'), busB.subscribe('postPublished')];
    const next = { id: 'p-4', title: 'Fresh', status: 'published' };
    busA.publish('postPublished', next);
    expect(await nextWithin(laterOnB, 1000)).toEqual(next);
    expect(await nextWithin(laterOnA, 1000)).toEqual(next);
  });

  it('passes an invalidation notice on once however often a copy of it is published again', async () => {
    const namespace = `portcullis:replay-${randomUUID()}`;
    const [a, b] = [link(namespace), link(namespace)];
    const attacker = await eavesdropper(namespace);
    await Promise.all([ready(a), ready(b)]);
    const [fanoutA, fanoutB] = [new SignedFanout(a, SECRET), new SignedFanout(b, SECRET)];
    const heardOnB: string[] = [];
    fanoutB.subscribe('invalidations', (sender) => heardOnB.push(sender));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(fanoutA.publish('invalidations', 'origin-a')).toBe(true);
    await expect.poll(() => heardOnB, { timeout: 1000, interval: 20 }).toEqual(['origin-a']);
    await expect.poll(() => attacker.recorded.length, { timeout: 1000, interval: 20 }).toBe(1);
    for (let copy = 0; copy < 3; copy++) await attacker.publish(attacker.recorded[0]!.channel, attacker.recorded[0]!.message);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(heardOnB).toEqual(['origin-a']);
  });
});
