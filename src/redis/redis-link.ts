import { Redis } from 'ioredis';

export interface RedisLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** A command that Redis has not answered within this long fails, and its caller falls back. */
const COMMAND_TIMEOUT_MS = 500;
/** Reconnection attempts back off to this interval and go on for as long as the server runs. */
const MAX_RECONNECT_DELAY_MS = 2000;

/**
 * The server's two connections to Redis (REDIS_URL): one for commands (shared rate-limit counters,
 * publishing) and one in subscriber mode (events and invalidation notices from other instances), which
 * Redis requires to be separate. Redis only ever speeds things up or shares counters: the database stays
 * the source of truth, so while Redis is unreachable commands fail at once (no offline queue), their
 * callers fall back to what one process can do, and both connections keep reconnecting; ioredis
 * re-subscribes the channels when the subscriber is back.
 */
export class RedisLink {
  readonly commands: Redis;
  readonly #subscriber: Redis;
  readonly #handlers = new Map<string, (message: string) => void>();
  #down = false;
  #closing = false;
  /** The subscriber connection is up and holds every channel. */
  #subscribed = false;
  get #prefix(): string {
    return this.namespace === '' ? '' : `${this.namespace}:`;
  }

  /**
   * `namespace`: put before every channel (and, by the rate-limit store, every key), so that deployments
   * sharing one Redis never see each other's messages or counters.
   */
  constructor(
    url: string,
    private readonly logger: RedisLogger,
    readonly namespace = '',
  ) {
    const retryStrategy = (attempt: number) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS);
    this.commands = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      retryStrategy,
      connectionName: 'portcullis',
    });
    // In subscriber mode a connection accepts no other command, not even ioredis' ready check: the channels
    // are subscribed here whenever the connection becomes ready (again), never queued before.
    this.#subscriber = new Redis(url, { retryStrategy, maxRetriesPerRequest: null, autoResubscribe: false, connectionName: 'portcullis-subscriber' });
    this.#subscriber.on('ready', () => void this.#subscribeAll());
    this.#subscriber.on('close', () => (this.#subscribed = false));
    this.#subscriber.on('message', (channel: string, message: string) => this.#handlers.get(channel.slice(this.#prefix.length))?.(message));
    for (const connection of [this.commands, this.#subscriber]) {
      // Without a listener an `error` event would end the process; one warning per outage is enough.
      connection.on('error', (error: Error) => this.#wentDown(error));
      // A connection that Redis closes gives no error until the first reconnection fails.
      connection.on('close', () => this.#closing || this.#wentDown(new Error('The connection to Redis closed')));
    }
    this.commands.on('ready', () => this.#cameBack());
  }

  /** Whether commands can be sent now (both connections were last seen ready). */
  get ready(): boolean {
    return this.commands.status === 'ready';
  }

  /** Sends `message` to every instance subscribed to `channel`; lost, not queued, while Redis is down. */
  publish(channel: string, message: string): boolean {
    if (!this.ready) return false;
    this.commands.publish(this.#prefix + channel, message).catch((error: unknown) => this.#wentDown(error));
    return true;
  }

  /** Calls `handler` with every message published to `channel` by any instance, this one included. */
  subscribe(channel: string, handler: (message: string) => void): void {
    if (this.#handlers.has(channel)) throw new Error(`${channel} already has a handler`);
    this.#handlers.set(channel, handler);
    if (this.#subscriber.status === 'ready') this.#subscriber.subscribe(this.#prefix + channel).catch((error: unknown) => this.#wentDown(error));
  }

  /** Subscribes every channel on a (re)connected subscriber; Redis is back once that is done. */
  async #subscribeAll(): Promise<void> {
    const channels = [...this.#handlers.keys()].map((channel) => this.#prefix + channel);
    try {
      if (channels.length > 0) await this.#subscriber.subscribe(...channels);
    } catch (error) {
      this.#wentDown(error);
      return;
    }
    this.#subscribed = true;
    this.#cameBack();
  }

  async close(): Promise<void> {
    this.#closing = true;
    this.#handlers.clear();
    await Promise.all([this.commands, this.#subscriber].map((connection) => connection.quit().catch(() => connection.disconnect())));
  }

  #wentDown(error: unknown): void {
    if (this.#down || this.#closing) return;
    this.#down = true;
    this.logger.warn(
      { err: error, meanwhile: 'rate limits count in this process; invalidations arrive through the database; events reach this instance only' },
      'redis.unavailable',
    );
  }

  /** Both connections are back, the channels subscribed again: events and notices flow again. */
  #cameBack(): void {
    if (!this.#down || this.commands.status !== 'ready' || !this.#subscribed) return;
    this.#down = false;
    this.logger.info({}, 'redis.available');
  }
}
