import { createHook } from 'node:async_hooks';

/**
 * Keeps one entry of Node's `process.nextTick` queue alive for the life of the process, so that `nextTick`
 * stays fast. Imported first by the modules that start the server, before anything large is loaded.
 *
 * Node builds each queue entry as an object literal with two computed (symbol) keys, and V8 remembers the
 * shape each computed key was added to in `nextTick`'s feedback. Those shapes live only while some entry
 * does: a full garbage collection that finds the queue empty frees them, the feedback no longer matches, and
 * V8 gives that feedback up for good. From then on every `nextTick` adds its two properties through the
 * runtime — about 370 ns instead of 65 ns here, several times per request. Building the server allocates
 * enough to cause such a collection; a process that never does keeps the fast path by luck. The retained
 * entry holds the shapes (a shape holds the shapes it was built from), whatever the collector finds.
 */
let retained: object | undefined;
const hook = createHook({
  init(_asyncId, type, _triggerAsyncId, resource) {
    if (type === 'TickObject') retained ??= resource;
  },
}).enable();
process.nextTick(() => {});
hook.disable();

/** The retained queue entry (undefined only if Node stops naming its entries `TickObject`). */
export function retainedTickObject(): object | undefined {
  return retained;
}
