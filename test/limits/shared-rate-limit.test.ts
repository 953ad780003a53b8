import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { RateLimitPolicy, redisStore } from '../../src/limits/rate-limit.js';
import { RedisLink } from '../../src/redis/redis-link.js';
import { PrivateRedis, REDIS_AVAILABLE, REDIS_URL } from '../helpers/redis.js';

// Budgets counted in Redis are one budget for every process that counts there; when Redis goes away each
// process goes on counting on its own, and no request fails because of the counters.

interface Logged {
  level: 'info' | 'warn';
  msg: string;
}

const links: RedisLink[] = [];
const privates: PrivateRedis[] = [];

function link(url: string, logged: Logged[] = []): RedisLink {
  const redis = new RedisLink(url, {
    info: (_obj, msg) => logged.push({ level: 'info', msg }),
    warn: (_obj, msg) => logged.push({ level: 'warn', msg }),
  });
  links.push(redis);
  return redis;
}

async function ready(redis: RedisLink): Promise<void> {
  for (let attempt = 0; attempt < 100 && !redis.ready; attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(redis.ready).toBe(true);
}

afterEach(async () => {
  await Promise.all(links.splice(0).map((redis) => redis.close()));
  await Promise.all(privates.splice(0).map((redis) => redis.stop()));
});

describe.skipIf(!REDIS_AVAILABLE)('rate limits counted in Redis', () => {
  it('are one budget for every process: what one spends, the other no longer has', async () => {
    const [a, b] = [link(REDIS_URL), link(REDIS_URL)];
    await Promise.all([ready(a), ready(b)]);
    const name = `test-${randomBytes(4).toString('hex')}`;
    const [onA, onB] = [a, b].map((redis) => new RateLimitPolicy(name, 3, 60, undefined, redisStore(redis.commands)));
    expect((await onA!.consume('client-1')).remaining).toBe(2);
    expect((await onB!.consume('client-1')).remaining).toBe(1);
    expect(await onA!.consume('client-1')).toMatchObject({ allowed: true, remaining: 0, limit: 3, policyName: name });
    // A refund on one process is seen by the other.
    await onB!.refund('client-1');
    expect(await onA!.consume('client-1')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await onB!.consume('client-1')).toMatchObject({ allowed: false, remaining: 0 });
    // Another key has its own budget.
    expect(await onB!.consume('client-2')).toMatchObject({ allowed: true, remaining: 2 });
  });

  it('are kept apart between deployments sharing one Redis (their namespaces)', async () => {
    const redis = link(REDIS_URL);
    await ready(redis);
    const name = `test-${randomBytes(4).toString('hex')}`;
    const staging = new RateLimitPolicy(name, 1, 60, undefined, redisStore(redis.commands, 'portcullis:staging'));
    const production = new RateLimitPolicy(name, 1, 60, undefined, redisStore(redis.commands, 'portcullis:production'));
    expect(await staging.consume('client-1')).toMatchObject({ allowed: true });
    expect(await production.consume('client-1')).toMatchObject({ allowed: true });
    expect(await staging.consume('client-1')).toMatchObject({ allowed: false });
  });

  it('weigh a request by its cost in the shared counter', async () => {
    const redis = link(REDIS_URL);
    await ready(redis);
    const policy = new RateLimitPolicy(`test-${randomBytes(4).toString('hex')}`, 10, 60, undefined, redisStore(redis.commands));
    expect(await policy.consume('k', 7)).toMatchObject({ allowed: true, remaining: 3 });
    expect(await policy.consume('k', 4)).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('fall back to counting in this process while Redis is down, with one warning, and share again once it is back', async () => {
    const server = await PrivateRedis.start();
    privates.push(server);
    const logged: Logged[] = [];
    const redis = link(server.url, logged);
    await ready(redis);
    const refusals: string[] = [];
    const name = 'fallback';
    const policy = new RateLimitPolicy(name, 2, 60, (refused) => refusals.push(refused), redisStore(redis.commands));
    const other = new RateLimitPolicy(name, 2, 60, undefined, redisStore(redis.commands));
    expect(await policy.consume('k')).toMatchObject({ allowed: true, remaining: 1 });

    await server.stop();
    for (let attempt = 0; attempt < 100 && redis.ready; attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
    // Counted here: a fresh budget of 2, enforced, and no error.
    expect(await policy.consume('k')).toMatchObject({ allowed: true, remaining: 1 });
    expect(await policy.consume('k')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await policy.consume('k')).toMatchObject({ allowed: false, remaining: 0 });
    expect(refusals).toEqual([name]);
    // Refunds and resets fall back as well instead of failing.
    await policy.refund('k');
    await policy.reset('k');
    expect(logged.filter((line) => line.level === 'warn').map((line) => line.msg)).toEqual(['redis.unavailable']);

    await server.start();
    await ready(redis);
    expect(logged.at(-1)).toEqual({ level: 'info', msg: 'redis.available' });
    // Shared again: a new Redis (its data went with the old one), one budget for both policies.
    expect(await policy.consume('again')).toMatchObject({ allowed: true, remaining: 1 });
    expect(await other.consume('again')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await policy.consume('again')).toMatchObject({ allowed: false });
  });
});
