import { describe, expect, it } from 'vitest';
import type { Fanout } from '../../src/events/fanout.js';
import { SignedFanout } from '../../src/events/signed-fanout.js';

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
