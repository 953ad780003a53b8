import { createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Fanout } from '../../src/events/fanout.js';
import {
  fanoutKey,
  FRESHNESS_MS,
  FUTURE_SKEW_MS,
  SeenMessages,
  SignedFanout,
  type Refusal,
} from '../../src/events/signed-fanout.js';

const SECRET = 'fanout-test-secret-0123456789abcdefghij';
const OTHER = 'another-deployment-secret-0123456789abcd';

/** A transport that delivers every message to every subscriber of its channel, as Redis would. */
class Loopback implements Fanout {
  readonly handlers = new Map<string, ((message: string) => void)[]>();
  publish(channel: string, message: string): boolean {
    for (const handler of this.handlers.get(channel) ?? []) handler(message);
    return true;
  }
  subscribe(channel: string, handler: (message: string) => void): void {
    this.handlers.set(channel, [...(this.handlers.get(channel) ?? []), handler]);
  }
}

function listen(fanout: Fanout, channel: string): string[] {
  const received: string[] = [];
  fanout.subscribe(channel, (message) => received.push(message));
  return received;
}

/**
 * A message as an instance holding `secret` sends it, made here with any time and id: the wire form
 * `<HMAC-SHA256>.<time>.<id>.<message>`, the HMAC over channel, time, id and message.
 */
function signedMessage(secret: string, channel: string, time: number, id: string, message: string): string {
  const mac = createHmac('sha256', fanoutKey(secret)).update(`${channel}\n${time}\n${id}\n${message}`).digest('base64url');
  return `${mac}.${time}.${id}.${message}`;
}

/** One message sent by an instance, taken off a transport that nobody else listens to, as an eavesdropper records it. */
function record(channel: string, message: string, clock?: () => number): string {
  const capture = new Loopback();
  const recorded = listen(capture, channel);
  new SignedFanout(capture, SECRET, null, undefined, clock).publish(channel, message);
  return recorded[0]!;
}

describe('messages between instances, signed', () => {
  it('delivers what an instance with the same secret sent, the message unchanged', () => {
    const transport = new Loopback();
    const received = listen(new SignedFanout(transport, SECRET), 'events');
    expect(new SignedFanout(transport, SECRET).publish('events', '{"a":1}')).toBe(true);
    expect(received).toEqual(['{"a":1}']);
  });

  it('drops what is unsigned, signed with another secret, altered, or signed for another channel, and says so', () => {
    const transport = new Loopback();
    const forged: string[] = [];
    const received: string[] = [];
    new SignedFanout(transport, SECRET, null, (channel) => forged.push(channel)).subscribe('events', (message) => received.push(message));
    new SignedFanout(transport, SECRET, null, (channel) => forged.push(channel)).subscribe('notices', (message) => received.push(message));
    transport.publish('events', '{"origin":"x","topic":"postPublished","payload":{}}');
    new SignedFanout(transport, OTHER).publish('events', '{"a":1}');
    // A message signed for one channel, replayed on another.
    const captured: string[] = [];
    transport.subscribe('notices', (message) => captured.push(message));
    new SignedFanout(transport, SECRET).publish('notices', 'n');
    expect(received).toEqual(['n']);
    transport.publish('events', captured[0]!);
    // The signature of a message, with another message.
    transport.publish('events', `${captured[0]!.split('.')[0]}.{"a":2}`);
    transport.publish('events', '');
    expect(received).toEqual(['n']);
    expect(forged).toEqual(['events', 'events', 'events', 'events', 'events']);
  });

  it('accepts messages signed under the previous secret while it is being replaced', () => {
    const transport = new Loopback();
    const received = listen(new SignedFanout(transport, OTHER, SECRET), 'events');
    new SignedFanout(transport, SECRET).publish('events', 'old');
    new SignedFanout(transport, OTHER).publish('events', 'new');
    expect(received).toEqual(['old', 'new']);
  });
});

describe('messages between instances, each accepted once and only while fresh', () => {
  it('sends the time and a random id under the signature', () => {
    const before = Date.now();
    const [first, second] = [record('events', '{"a":1}'), record('events', '{"a":1}')];
    const [mac, time, id] = first.split('.');
    expect(first).toBe(signedMessage(SECRET, 'events', Number(time), id!, '{"a":1}'));
    expect(mac).toMatch(/^[\w-]{43}$/);
    expect(Number(time)).toBeGreaterThanOrEqual(before);
    expect(Number(time)).toBeLessThanOrEqual(Date.now());
    expect(id).toMatch(/^[\w-]{22}$/);
    expect(second.split('.')[2]).not.toBe(id);
  });

  it('delivers a message recorded from the transport and published again once, refusing each copy as a replay', () => {
    const transport = new Loopback();
    const refused: [string, Refusal][] = [];
    const received = listen(new SignedFanout(transport, SECRET, null, (channel, reason) => refused.push([channel, reason])), 'events');
    const recorded = listen(transport, 'events');
    new SignedFanout(transport, SECRET).publish('events', '{"id":"p-1","status":"published"}');
    for (let copy = 0; copy < 3; copy++) transport.publish('events', recorded[0]!);
    expect(received).toEqual(['{"id":"p-1","status":"published"}']);
    expect(refused).toEqual([['events', 'replay'], ['events', 'replay'], ['events', 'replay']]);
    // Other messages still arrive.
    new SignedFanout(transport, SECRET).publish('events', '{"id":"p-2","status":"published"}');
    expect(received).toEqual(['{"id":"p-1","status":"published"}', '{"id":"p-2","status":"published"}']);
  });

  it('hands a process its own message once, as the transport does, and refuses copies of it', () => {
    const transport = new Loopback();
    const refused: Refusal[] = [];
    const fanout = new SignedFanout(transport, SECRET, null, (_channel, reason) => refused.push(reason));
    const received = listen(fanout, 'notices');
    const recorded = listen(transport, 'notices');
    fanout.publish('notices', 'origin-1');
    transport.publish('notices', recorded[0]!);
    expect(received).toEqual(['origin-1']);
    expect(refused).toEqual(['replay']);
  });

  it('drops a message signed with the secret whose time is older than the window, or further ahead than the skew allowed', () => {
    const transport = new Loopback();
    const refused: Refusal[] = [];
    const received = listen(new SignedFanout(transport, SECRET, null, (_channel, reason) => refused.push(reason)), 'events');
    const now = Date.now();
    transport.publish('events', signedMessage(SECRET, 'events', now - FRESHNESS_MS - 1000, 'A'.repeat(22), 'too old'));
    transport.publish('events', signedMessage(SECRET, 'events', now + FUTURE_SKEW_MS + 1000, 'B'.repeat(22), 'too far ahead'));
    transport.publish('events', signedMessage(SECRET, 'events', now - 1000, 'C'.repeat(22), 'a second old'));
    transport.publish('events', signedMessage(SECRET, 'events', now + 1000, 'D'.repeat(22), 'a second ahead'));
    expect(received).toEqual(['a second old', 'a second ahead']);
    expect(refused).toEqual(['time', 'time']);
  });

  it('accepts a message up to the edges of the window by its own clock, and refuses a copy once the window has passed', () => {
    let now = 1_800_000_000_000;
    const transport = new Loopback();
    const refused: Refusal[] = [];
    const received = listen(new SignedFanout(transport, SECRET, null, (_channel, reason) => refused.push(reason), () => now), 'events');
    transport.publish('events', signedMessage(SECRET, 'events', now - FRESHNESS_MS - 1, 'A'.repeat(22), 'too old'));
    transport.publish('events', signedMessage(SECRET, 'events', now + FUTURE_SKEW_MS + 1, 'B'.repeat(22), 'too far ahead'));
    transport.publish('events', signedMessage(SECRET, 'events', now - FRESHNESS_MS, 'C'.repeat(22), 'oldest accepted'));
    transport.publish('events', signedMessage(SECRET, 'events', now + FUTURE_SKEW_MS, 'D'.repeat(22), 'furthest ahead accepted'));
    const message = record('events', 'sent now', () => now);
    transport.publish('events', message);
    expect(received).toEqual(['oldest accepted', 'furthest ahead accepted', 'sent now']);
    expect(refused).toEqual(['time', 'time']);
    // Its id forgotten, a copy is refused for its age.
    now += FRESHNESS_MS + 1;
    transport.publish('events', message);
    expect(received).toHaveLength(3);
    expect(refused).toEqual(['time', 'time', 'time']);
  });

  it('refuses a message whose time or id was altered as it refuses a forgery: the signature covers both', () => {
    const transport = new Loopback();
    const refused: Refusal[] = [];
    const received = listen(new SignedFanout(transport, SECRET, null, (_channel, reason) => refused.push(reason)), 'events');
    const original = record('events', '{"a":1}');
    const [mac, time, id] = original.split('.') as [string, string, string];
    const message = original.slice(mac.length + time.length + id.length + 3);
    transport.publish('events', `${mac}.${Number(time) + 1}.${id}.${message}`);
    transport.publish('events', `${mac}.${Date.now() + 1000}.${id}.${message}`);
    transport.publish('events', `${mac}.${time}.${id.slice(0, -1)}${id.endsWith('A') ? 'B' : 'A'}.${message}`);
    transport.publish('events', `${mac}.${time}.${randomBytes(16).toString('base64url')}.${message}`);
    // Refused for the signature, not remembered: the message as sent still arrives.
    transport.publish('events', original);
    expect(received).toEqual(['{"a":1}']);
    expect(refused).toEqual(['signature', 'signature', 'signature', 'signature']);
  });
});

describe('the ids a subscription remembers', () => {
  const now = 1_800_000_000_000;

  it('forgets ids whose window has passed, a copy of them then being refused for its time', () => {
    const seen = new SeenMessages();
    for (let i = 0; i < 10; i++) expect(seen.admit(`id-${i}`, now + i, now + i)).toBeNull();
    expect(seen.size).toBe(10);
    expect(seen.admit('id-0', now, now + 10)).toBe('replay');
    const later = now + FRESHNESS_MS + 5;
    expect(seen.admit('later', later, later)).toBeNull();
    // id-0 … id-4 are older than the window by then; id-5 … id-9 and the new one remain.
    expect(seen.size).toBe(6);
    expect(seen.admit('id-0', now, later)).toBe('time');
    expect(seen.admit('id-5', now + 5, later)).toBe('replay');
  });

  it('holds no more than its capacity under a flood of fresh messages, accepts every one, and still accepts no copy', () => {
    const seen = new SeenMessages(100);
    const sent = Array.from({ length: 1000 }, (_, i) => ({ id: `id-${i}`, time: now + i }));
    for (const { id, time } of sent) {
      expect(seen.admit(id, time, time)).toBeNull();
      expect(seen.size).toBeLessThanOrEqual(100);
    }
    // Every copy is refused: the 900 forgotten at the cap for their time, the 100 remembered as replays.
    const copies = sent.map(({ id, time }) => seen.admit(id, time, now + 1000));
    expect(copies.slice(0, 900).every((refusal) => refusal === 'time')).toBe(true);
    expect(copies.slice(900).every((refusal) => refusal === 'replay')).toBe(true);
    expect(seen.admit('fresh', now + 1000, now + 1000)).toBeNull();
    expect(seen.size).toBe(100);
  });
});
