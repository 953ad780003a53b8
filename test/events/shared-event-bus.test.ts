import { afterEach, describe, expect, it } from 'vitest';
import { SharedEventBus } from '../../src/events/shared-event-bus.js';
import { RedisLink } from '../../src/redis/redis-link.js';
import { REDIS_AVAILABLE, REDIS_URL } from '../helpers/redis.js';

const quiet = { info: () => {}, warn: () => {} };
const links: RedisLink[] = [];

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

afterEach(async () => {
  await Promise.all(links.splice(0).map((redis) => redis.close()));
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
});
