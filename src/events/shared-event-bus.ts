import { randomUUID } from 'node:crypto';
import { InProcessEventBus, type ResourceEvents, type Topic } from './event-bus.js';
import type { Fanout } from './fanout.js';

const CHANNEL = 'resource-events';
const TOPICS: ReadonlySet<string> = new Set<Topic>(['postPublished', 'commentAdded']);

interface Envelope {
  origin: string;
  topic: Topic;
  payload: Readonly<Record<string, unknown>>;
}

/**
 * Resource events for subscribers on every process: an event is delivered here at once and sent through
 * the fanout to the others, which deliver it to their own subscribers. Each subscriber still decides per
 * event whether its caller may read it, so a message only says what happened, never who may see it.
 */
export class SharedEventBus extends InProcessEventBus {
  readonly #origin = randomUUID();

  constructor(private readonly fanout: Fanout) {
    super();
    fanout.subscribe(CHANNEL, (message) => {
      const envelope = parseEnvelope(message);
      if (envelope && envelope.origin !== this.#origin) super.publish(envelope.topic, envelope.payload);
    });
  }

  override publish<T extends Topic>(topic: T, payload: ResourceEvents[T]): void {
    super.publish(topic, payload);
    const envelope: Envelope = { origin: this.#origin, topic, payload };
    this.fanout.publish(CHANNEL, JSON.stringify(envelope));
  }
}

/** An envelope this server could have sent, or null (a message of another shape is ignored). */
function parseEnvelope(message: string): Envelope | null {
  try {
    const value = JSON.parse(message) as Partial<Envelope> | null;
    if (typeof value?.origin !== 'string' || typeof value.topic !== 'string' || !TOPICS.has(value.topic)) return null;
    if (typeof value.payload !== 'object' || value.payload === null || Array.isArray(value.payload)) return null;
    return value as Envelope;
  } catch {
    return null;
  }
}
