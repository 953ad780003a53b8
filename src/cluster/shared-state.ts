import cluster from 'node:cluster';
import { createHash, randomUUID } from 'node:crypto';
import type { Config } from '../config/config.js';
import { InProcessEventBus } from '../events/event-bus.js';
import type { Fanout } from '../events/fanout.js';
import { SharedEventBus } from '../events/shared-event-bus.js';
import { SignedFanout } from '../events/signed-fanout.js';
import { inProcessStore, redisStore, type LimiterStore } from '../limits/rate-limit.js';
import { clusterStore } from './cluster-counters.js';
import type { InvalidationFeed } from '../oauth/tokens/invalidation-feed.js';
import { RedisLink, type RedisLogger } from '../redis/redis-link.js';
import { onInvalidationWritten } from '../storage/invalidations.js';
import { ClusterFanout } from './cluster-fanout.js';

const INVALIDATIONS_CHANNEL = 'invalidations';

/** What this process shares with the other server processes on the same data. */
export interface SharedState {
  /** Where rate-limit and sign-in counters live. */
  limiterStore: LimiterStore;
  /** Resource events for GraphQL subscribers, on every process. */
  events: InProcessEventBus;
  /** Tells the others to read the invalidations table now (undefined: nobody to tell). */
  announceInvalidations?: () => void;
  /** Has `feed` read this process's own invalidation writes soon after they are made, and others' announcements at once. */
  followInvalidations(feed: InvalidationFeed): () => void;
  close(): Promise<void>;
}

/**
 * What this deployment's keys and channels start with in Redis: its issuer (the URL clients use, the same on
 * every instance of one deployment and different between deployments), so that a staging and a production
 * deployment sharing one Redis never share budgets, events or notices.
 */
export function redisNamespace(issuer: string): string {
  return `portcullis:${createHash('sha256').update(issuer).digest('base64url').slice(0, 12)}`;
}

/**
 * With REDIS_URL, every instance and worker shares counters, events and invalidation notices through Redis;
 * without it, the workers of one instance (node:cluster) share them through the primary; a single process
 * keeps them to itself. The database remains the source of truth for invalidation in every case.
 */
export function shareAcrossProcesses(
  config: Pick<Config, 'redisUrl' | 'issuer' | 'keyEncryptionSecret' | 'previousKeyEncryptionSecret'>,
  logger: RedisLogger,
  /** Told of each invalidation notice sent or received (metrics). */
  onNotice: (direction: 'sent' | 'received') => void = () => {},
): SharedState {
  const redis = config.redisUrl ? new RedisLink(config.redisUrl, logger, redisNamespace(config.issuer)) : null;
  // Redis may be reachable by others than the instances: what they send each other there is signed.
  let lastRefusalLogged = 0;
  const fanout: Fanout | null = redis
    ? new SignedFanout(redis, config.keyEncryptionSecret, config.previousKeyEncryptionSecret, (channel, reason) => {
        // At most one line a minute, however many are sent.
        if (Date.now() - lastRefusalLogged < 60_000) return;
        lastRefusalLogged = Date.now();
        logger.warn({ channel, reason }, 'redis.message_refused: not signed by an instance of this deployment, outside its time window, or a copy');
      })
    : cluster.isWorker
      ? new ClusterFanout()
      : null;
  const limiterStore = redis ? redisStore(redis.commands, redis.namespace) : cluster.isWorker ? clusterStore : inProcessStore;
  const close = async () => redis?.close();
  if (!fanout) {
    return { limiterStore, events: new InProcessEventBus(), followInvalidations: () => () => {}, close };
  }
  const origin = randomUUID();
  return {
    limiterStore,
    events: new SharedEventBus(fanout),
    announceInvalidations() {
      if (fanout.publish(INVALIDATIONS_CHANNEL, origin)) onNotice('sent');
    },
    followInvalidations(feed) {
      fanout.subscribe(INVALIDATIONS_CHANNEL, (sender) => {
        if (sender === origin) return;
        onNotice('received');
        feed.pollNow();
      });
      return onInvalidationWritten(() => feed.nudge());
    },
    close,
  };
}
