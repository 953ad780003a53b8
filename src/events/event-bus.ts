/**
 * What happened to the resources, for subscribers: `postPublished` (a post became readable by everyone it
 * is published to) and `commentAdded`. The operations publish after their write has committed; subscribers
 * decide per event whether their caller may read it (resolvers.ts).
 */
export interface ResourceEvents {
  postPublished: Readonly<Record<string, unknown>>;
  commentAdded: Readonly<Record<string, unknown>>;
}

export type Topic = keyof ResourceEvents;

export interface EventPublisher {
  publish<T extends Topic>(topic: T, payload: ResourceEvents[T]): void;
}

export interface EventBus extends EventPublisher {
  /** Events of the topic from now on, until the iterator is returned (the subscription ends). */
  subscribe<T extends Topic>(topic: T): AsyncIterableIterator<ResourceEvents[T]>;
}

/** The events one subscriber has not taken yet; a subscriber that falls this far behind is ended, not buffered for. */
export const MAX_QUEUED_EVENTS = 256;

/** Thrown to a subscriber that fell MAX_QUEUED_EVENTS behind: its subscription ends with an error. */
export class SubscriberTooSlowError extends Error {
  constructor() {
    super(`The subscriber fell ${MAX_QUEUED_EVENTS} events behind; subscribe again.`);
    this.name = 'SubscriberTooSlowError';
  }
}

/** Events within this process: every subscriber on this instance gets every event published on it. */
export class InProcessEventBus implements EventBus {
  readonly #listeners = new Map<Topic, Set<(payload: unknown) => void>>();

  publish<T extends Topic>(topic: T, payload: ResourceEvents[T]): void {
    for (const listener of this.#listeners.get(topic) ?? []) listener(payload);
  }

  /** How many subscriptions are open (tests, metrics). */
  get subscriberCount(): number {
    let count = 0;
    for (const listeners of this.#listeners.values()) count += listeners.size;
    return count;
  }

  subscribe<T extends Topic>(topic: T): AsyncIterableIterator<ResourceEvents[T]> {
    const queue: ResourceEvents[T][] = [];
    let waiting: ((result: IteratorResult<ResourceEvents[T]>) => void) | null = null;
    let failing: ((error: unknown) => void) | null = null;
    let ended = false;
    let failure: Error | null = null;
    let listeners = this.#listeners.get(topic);
    if (!listeners) this.#listeners.set(topic, (listeners = new Set()));
    const all = listeners;
    const end = () => {
      ended = true;
      all.delete(listener);
    };
    const listener = (payload: unknown) => {
      if (ended) return;
      if (waiting) {
        const resolve = waiting;
        waiting = failing = null;
        resolve({ value: payload as ResourceEvents[T], done: false });
      } else if (queue.length >= MAX_QUEUED_EVENTS) {
        failure = new SubscriberTooSlowError();
        end();
      } else queue.push(payload as ResourceEvents[T]);
    };
    all.add(listener);
    const iterator: AsyncIterableIterator<ResourceEvents[T]> = {
      next() {
        if (queue.length > 0) return Promise.resolve({ value: queue.shift()!, done: false });
        if (failure) return Promise.reject(failure);
        if (ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          waiting = resolve;
          failing = reject;
        });
      },
      return() {
        end();
        queue.length = 0;
        const resolve = waiting;
        waiting = failing = null;
        resolve?.({ value: undefined, done: true });
        return Promise.resolve({ value: undefined, done: true });
      },
      throw(error: unknown) {
        end();
        failing?.(error);
        waiting = failing = null;
        return Promise.reject(error);
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    return iterator;
  }
}
