import type { Cluster } from 'node:cluster';
import type { Fanout } from '../events/fanout.js';

interface FanoutMessage {
  portcullisFanout: true;
  channel: string;
  message: string;
}

function isFanoutMessage(value: unknown): value is FanoutMessage {
  const candidate = value as Partial<FanoutMessage> | null;
  return candidate?.portcullisFanout === true && typeof candidate.channel === 'string' && typeof candidate.message === 'string';
}

/**
 * The workers of one instance (WORKERS > 1, no Redis) reach each other through the primary: a worker sends
 * its message up the IPC channel node:cluster gives it, and the primary (relayFanout) sends it to every
 * worker, the sender included.
 */
export class ClusterFanout implements Fanout {
  readonly #handlers = new Map<string, (message: string) => void>();

  constructor() {
    process.on('message', (value: unknown) => {
      if (isFanoutMessage(value)) this.#handlers.get(value.channel)?.(value.message);
    });
  }

  publish(channel: string, message: string): boolean {
    if (!process.connected || !process.send) return false;
    const value: FanoutMessage = { portcullisFanout: true, channel, message };
    // The primary going away closes the channel; the message is lost like one sent while Redis is down.
    process.send(value, undefined, undefined, () => {});
    return true;
  }

  subscribe(channel: string, handler: (message: string) => void): void {
    if (this.#handlers.has(channel)) throw new Error(`${channel} already has a handler`);
    this.#handlers.set(channel, handler);
  }
}

/** In the primary: every worker's fanout message goes to every worker that is still connected. */
export function relayFanout(cluster: Cluster): void {
  cluster.on('message', (_sender, value: unknown) => {
    if (!isFanoutMessage(value)) return;
    for (const worker of Object.values(cluster.workers ?? {})) {
      if (worker?.isConnected()) worker.send(value, undefined, () => {});
    }
  });
}
