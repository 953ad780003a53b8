import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Fanout } from './fanout.js';

const MAC_LENGTH = 43; // SHA-256, base64url
const ID_LENGTH = 22; // 128 random bits, base64url

/**
 * How long after it was sent (by the sender's clock, read against the receiver's) a message is accepted.
 * Within this time a copy is recognised by its id, after it by its age, so no copy gets through either way;
 * the window decides how long ids must be remembered, and how late a copy may still reach a process that
 * never saw the original (one started, or whose subscriber reconnected, after it was sent), which accepts
 * it once. It must cover delivery through Redis plus the clock skew between instances, and stays short
 * because nothing waits for a late message: invalidation notices only make the others read the database
 * sooner than their next poll (a quarter of a second), and a subscription event is meant to arrive as it
 * happens.
 */
export const FRESHNESS_MS = 30_000;

/**
 * A message may carry a time this far ahead of the receiver's clock: the sender's clock runs ahead. Only
 * skew explains it, so the allowance is small; instances whose clocks differ by more do not hear each
 * other (events stay on their instance, invalidation arrives through the database's sequence).
 */
export const FUTURE_SKEW_MS = 5_000;

/**
 * Ids one subscription remembers at most (about 90 bytes each, some 4.5 MB): a window's worth while the
 * instances together send up to 1,600 messages a second on one channel. Only instances can make a message
 * that is remembered (a copy is refused before it is, a forgery before its id is read), so an attacker
 * cannot fill this; SeenMessages says what happens when the instances do.
 */
export const MAX_REMEMBERED_MESSAGES = 50_000;

/** Why a message was dropped: its signature failed (or it was not a signed message), its time was outside the window, or it was a copy. */
export type Refusal = 'signature' | 'time' | 'replay';

/** The key that signs what instances send each other, from the secret they share (KEY_ENCRYPTION_SECRET). */
export function fanoutKey(secret: string): Buffer {
  // v2: the signature covers a time and an id; a message in the earlier form never verifies under this key.
  return Buffer.from(hkdfSync('sha256', secret, 'portcullis/fanout', 'instance messages v2', 32));
}

/**
 * Messages between instances through a transport others may reach (Redis), signed with a key only the
 * instances hold: a message is sent as `<HMAC-SHA256>.<time>.<id>.<message>`, the time in milliseconds by
 * the sender's clock and the id 128 random bits, all three under the signature. A receiver drops a message
 * that does not verify (so someone who can publish on Redis cannot make subscribers receive invented posts
 * or comments), one whose time is outside the freshness window, and one whose id it has accepted before
 * (so a message recorded from Redis and published again is delivered once, not once per copy — a copy of a
 * post's event would otherwise show subscribers a post its author has since made a draft, and charge their
 * rate budgets). While the secret is being replaced, messages signed under the previous one are accepted too.
 *
 * Like the transport, it hands each subscriber the messages this process sent as well: the first copy that
 * comes back is accepted, and the layers above recognise their own (they put an origin in the message).
 */
export class SignedFanout implements Fanout {
  readonly #keys: readonly Buffer[];

  constructor(
    private readonly inner: Fanout,
    secret: string,
    previousSecret: string | null = null,
    /** Called for every message dropped; called often under a flood, so it must log sparingly. */
    private readonly onRefused: (channel: string, reason: Refusal) => void = () => {},
    private readonly clock: () => number = Date.now,
  ) {
    this.#keys = previousSecret === null ? [fanoutKey(secret)] : [fanoutKey(secret), fanoutKey(previousSecret)];
  }

  publish(channel: string, message: string): boolean {
    const time = String(Math.floor(this.clock()));
    const id = randomBytes(16).toString('base64url');
    return this.inner.publish(channel, `${mac(this.#keys[0]!, channel, time, id, message)}.${time}.${id}.${message}`);
  }

  subscribe(channel: string, handler: (message: string) => void): void {
    // One memory per subscription: a flood on one channel cannot push another channel's ids out.
    const seen = new SeenMessages();
    this.inner.subscribe(channel, (signed) => {
      const opened = this.#open(channel, signed);
      if (!opened) return this.onRefused(channel, 'signature');
      const refusal = seen.admit(opened.id, opened.time, this.clock());
      if (refusal) return this.onRefused(channel, refusal);
      handler(opened.message);
    });
  }

  /** The parts of a message signed for `channel` under one of the keys, or null. */
  #open(channel: string, signed: string): { time: number; id: string; message: string } | null {
    const timeEnd = signed.indexOf('.', MAC_LENGTH + 1);
    const idEnd = timeEnd + 1 + ID_LENGTH;
    if (signed.charAt(MAC_LENGTH) !== '.' || timeEnd < 0 || signed.charAt(idEnd) !== '.') return null;
    const time = signed.slice(MAC_LENGTH + 1, timeEnd);
    if (!/^\d{1,15}$/.test(time)) return null;
    const id = signed.slice(timeEnd + 1, idEnd);
    const message = signed.slice(idEnd + 1);
    const given = Buffer.from(signed.slice(0, MAC_LENGTH));
    const verified = this.#keys.some((key) => {
      const expected = Buffer.from(mac(key, channel, time, id, message));
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
    return verified ? { time: Number(time), id, message } : null;
  }
}

/**
 * Covers the channel too, so a message signed for one channel is not accepted on another. The parts are
 * unambiguous: the time is digits only and the id has a fixed length, so no two messages sign the same text.
 */
function mac(key: Buffer, channel: string, time: string, id: string, message: string): string {
  return createHmac('sha256', key).update(`${channel}\n${time}\n${id}\n`).update(message).digest('base64url');
}

/**
 * The ids of the messages one subscription accepted, each kept while a copy of it would still be fresh
 * (FRESHNESS_MS after its time) and forgotten after, when a copy is refused for its age instead.
 *
 * At the cap the oldest id is forgotten early, and from then on every message no newer than it is refused
 * for its time: the window shrinks to what the memory holds, so a copy is still never delivered, while
 * fresh messages keep flowing; only a message that arrives later than the shrunken window is dropped, which
 * delivery through Redis (best effort) allows.
 */
export class SeenMessages {
  /** Id -> the time in the message, in the order accepted (nearly the order of their times). */
  readonly #times = new Map<string, number>();
  /** Messages at or before this time are refused: ids that old may have been forgotten at the cap. */
  #floor = -Infinity;

  constructor(private readonly capacity = MAX_REMEMBERED_MESSAGES) {}

  get size(): number {
    return this.#times.size;
  }

  /** Remembers the message and returns null when it is to be delivered; otherwise why it is not. */
  admit(id: string, time: number, now: number): Refusal | null {
    this.#forget(now);
    if (time < now - FRESHNESS_MS || time > now + FUTURE_SKEW_MS || time <= this.#floor) return 'time';
    if (this.#times.has(id)) return 'replay';
    if (this.#times.size >= this.capacity) {
      const [oldest, oldestTime] = this.#times.entries().next().value!;
      this.#times.delete(oldest);
      this.#floor = Math.max(this.#floor, oldestTime);
    }
    // A copy, not a slice of the message: a short slice keeps the whole message it came from in memory.
    this.#times.set(Buffer.from(id, 'latin1').toString('latin1'), time);
    return null;
  }

  /**
   * Drops the ids a copy of which would be refused for its age anyway. Ids are kept in the order accepted,
   * which follows their times except for the skew between senders, so one may outlive its window by that
   * much; the cap still bounds them.
   */
  #forget(now: number): void {
    for (const [id, time] of this.#times) {
      if (time >= now - FRESHNESS_MS) break;
      this.#times.delete(id);
    }
  }
}
