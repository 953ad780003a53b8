import fs from 'node:fs';
import WebSocket from 'ws';

/** The inspector's address, from the line Node prints when started with `--inspect=127.0.0.1:0`. */
export function inspectorUrl(log: string): string | null {
  return /Debugger listening on (ws:\/\/127\.0\.0\.1:\d+\/[\w-]+)/.exec(fs.readFileSync(log, 'utf8'))?.[1] ?? null;
}

/** A process's memory right after a full garbage collection, in MiB. */
export interface CollectedMemory {
  /** Resident memory. */
  rss: number;
  /** The V8 heap still in use: what the process keeps alive. */
  heapUsed: number;
}

/**
 * Runs a full garbage collection in a server process through its inspector, then reads its memory
 * (`process.memoryUsage()`): without the garbage that V8 holds between collections, and that makes sampled
 * resident memory climb and fall by a hundred MiB at this load, two such readings compare like with like.
 * The collection pauses the process for some tens of milliseconds.
 */
export async function collectedMemory(url: string): Promise<CollectedMemory> {
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  let lastId = 0;
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<Record<string, any>>((resolve, reject) => {
      const id = ++lastId;
      const onMessage = (data: WebSocket.RawData) => {
        const message = JSON.parse(String(data)) as { id?: number; result?: Record<string, any>; error?: { message: string } };
        if (message.id !== id) return;
        socket.off('message', onMessage);
        if (message.error) reject(new Error(`${method}: ${message.error.message}`));
        else resolve(message.result ?? {});
      };
      socket.on('message', onMessage);
      socket.send(JSON.stringify({ id, method, params }));
    });
  try {
    await call('HeapProfiler.collectGarbage');
    const evaluated = await call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true });
    const usage = JSON.parse(String(evaluated.result?.value)) as { rss: number; heapUsed: number };
    return { rss: usage.rss / 1024 / 1024, heapUsed: usage.heapUsed / 1024 / 1024 };
  } finally {
    socket.close();
  }
}
