import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { Fanout } from './fanout.js';

const MAC_LENGTH = 43; // SHA-256, base64url

/** The key that signs what instances send each other, from the secret they share (KEY_ENCRYPTION_SECRET). */
export function fanoutKey(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'portcullis/fanout', 'instance messages v1', 32));
}

/**
 * Messages between instances through a transport others may reach (Redis), signed with a key only the
 * instances hold: a message is sent as `<HMAC-SHA256>.<message>` and one that does not verify is dropped,
 * so someone who can publish on Redis cannot make subscribers receive invented posts or comments. While
 * the secret is being replaced, messages signed under the previous one are accepted too.
 */
export class SignedFanout implements Fanout {
  readonly #keys: readonly Buffer[];

  constructor(
    private readonly inner: Fanout,
    secret: string,
    previousSecret: string | null = null,
    private readonly onForged: (channel: string) => void = () => {},
  ) {
    this.#keys = previousSecret === null ? [fanoutKey(secret)] : [fanoutKey(secret), fanoutKey(previousSecret)];
  }

  publish(channel: string, message: string): boolean {
    return this.inner.publish(channel, `${mac(this.#keys[0]!, channel, message)}.${message}`);
  }

  subscribe(channel: string, handler: (message: string) => void): void {
    this.inner.subscribe(channel, (signed) => {
      const message = signed.slice(MAC_LENGTH + 1);
      const given = Buffer.from(signed.slice(0, MAC_LENGTH));
      const verified =
        signed.charAt(MAC_LENGTH) === '.' &&
        this.#keys.some((key) => {
          const expected = Buffer.from(mac(key, channel, message));
          return given.length === expected.length && timingSafeEqual(given, expected);
        });
      if (verified) handler(message);
      else this.onForged(channel);
    });
  }
}

/** Covers the channel too: a message signed for one channel is not accepted on another. */
function mac(key: Buffer, channel: string, message: string): string {
  return createHmac('sha256', key).update(channel).update('\n').update(message).digest('base64url');
}
