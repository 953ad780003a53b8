import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { Redis } from 'ioredis';
import { freePort } from './server-process.js';

/**
 * The Redis suites run against the shared Redis when it answers. With PORTCULLIS_TEST_REDIS=require (set by
 * .ci/run) an unreachable Redis fails the run instead of being skipped. Suites that stop Redis start their
 * own (privateRedis) and never touch the shared one.
 */
export const REDIS_URL = process.env.PORTCULLIS_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const REDIS_REQUIRED = process.env.PORTCULLIS_TEST_REDIS === 'require';
const REDIS_SERVER = process.env.PORTCULLIS_REDIS_SERVER ?? 'redis-server';

async function answers(url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2000 });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

function serverInstalled(): boolean {
  return process.env.PATH!.split(':').some((dir) => fs.existsSync(`${dir}/${REDIS_SERVER}`)) || fs.existsSync(REDIS_SERVER);
}

/** Whether the Redis suites run here; throws when they are required and cannot. */
export async function isRedisAvailable(): Promise<boolean> {
  if ((await answers(REDIS_URL)) && serverInstalled()) return true;
  if (REDIS_REQUIRED) throw new Error(`Redis is required but ${REDIS_URL} does not answer or ${REDIS_SERVER} is not installed`);
  console.warn(`[portcullis tests] Redis not reachable at ${REDIS_URL} (or ${REDIS_SERVER} missing): skipping the Redis suites`);
  return false;
}

export const REDIS_AVAILABLE = await isRedisAvailable();

/** A Redis of the test's own, on a free port of 127.0.0.1, that it may stop and start again. */
export class PrivateRedis {
  #child: ChildProcess | null = null;

  private constructor(readonly port: number) {}

  static async start(): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort());
    await redis.start();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    if (this.#child) return;
    this.#child = spawn(REDIS_SERVER, ['--bind', '127.0.0.1', '--port', String(this.port), '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    for (let attempt = 0; attempt < 100; attempt++) {
      if (await answers(this.url)) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`redis-server did not start on port ${this.port}`);
  }

  async stop(): Promise<void> {
    const child = this.#child;
    if (!child) return;
    this.#child = null;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}
