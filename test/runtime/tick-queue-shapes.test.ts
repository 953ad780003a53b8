import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const MODULE = pathToFileURL(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/tick-queue-shapes.ts')).href;

/** Runs `body` as an ES module in a fresh Node process with V8's test functions; returns its stdout lines. */
function runChild(body: string): string[] {
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--allow-natives-syntax', '--expose-gc', '--input-type=module', '-e', body], { encoding: 'utf8' });
  expect(child.stderr).toBe('');
  expect(child.status).toBe(0);
  return child.stdout.trim().split('\n');
}

/** Module source that captures the next `process.nextTick` queue entry into `captured`. */
const CAPTURE = `
import { createHook } from 'node:async_hooks';
function nextEntry() {
  let captured;
  const hook = createHook({ init(id, type, trigger, resource) { if (type === 'TickObject') captured ??= resource; } }).enable();
  process.nextTick(() => {});
  hook.disable();
  return captured;
}`;

describe('the retained nextTick queue entry', () => {
  it('is an entry of the queue, held for the life of the process', () => {
    const lines = runChild(`${CAPTURE}
      const { retainedTickObject } = await import(${JSON.stringify(MODULE)});
      const retained = retainedTickObject();
      console.log(typeof retained, typeof retained.callback, Object.getOwnPropertySymbols(retained).map(String).join(' '));
      await new Promise((resolve) => setTimeout(resolve, 10));
      gc();
      console.log(retainedTickObject() === retained);
    `);
    expect(lines).toEqual(['object function Symbol(async_id_symbol) Symbol(trigger_async_id_symbol)', 'true']);
  });

  it('keeps the shape new entries are built with across a full collection of an empty queue', () => {
    // Without a retained entry the shapes are collected: an entry built after the collection has a new one,
    // and nextTick's feedback, recorded for the old, is given up (the slow path of every later nextTick).
    const lines = runChild(`${CAPTURE}
      const { retainedTickObject } = await import(${JSON.stringify(MODULE)});
      await new Promise((resolve) => setTimeout(resolve, 10));
      gc();
      await new Promise((resolve) => setTimeout(resolve, 10));
      console.log(%HaveSameMap(retainedTickObject(), nextEntry()));
    `);
    expect(lines).toEqual(['true']);
  });
});
