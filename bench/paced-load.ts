import http from 'node:http';
import { performance } from 'node:perf_hooks';

export interface PacedResult {
  requests: number;
  p50: number;
  p99: number;
  /** Responses other than 2xx, and failed requests. */
  errors: number;
}

/**
 * An open-loop load at a steady rate: request i is due at start + i / rate, whether or not earlier ones have
 * been answered, and its latency counts from when it was due, so a server that falls behind is charged for
 * the wait (no coordinated omission). autocannon's own rate option sends each second's quota in a burst at
 * the start of the second, which measures queueing again. Requests go over at most `connections` keep-alive
 * connections; latencies are in milliseconds, with fractions.
 */
export async function pacedLoad(options: {
  url: string;
  headers: Record<string, string>;
  rate: number;
  seconds: number;
  connections: number;
}): Promise<PacedResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.connections });
  const interval = 1000 / options.rate;
  const total = Math.round(options.rate * options.seconds);
  const latencies: number[] = [];
  let errors = 0;
  let sent = 0;
  let settled = 0;
  const start = performance.now();

  await new Promise<void>((resolve) => {
    const settle = (due: number, ok: boolean) => {
      latencies.push(performance.now() - due);
      if (!ok) errors++;
      if (++settled === total) resolve();
    };
    const send = (due: number) => {
      const request = http.get(options.url, { agent, headers: options.headers }, (response) => {
        response.resume();
        response.once('end', () => settle(due, response.statusCode !== undefined && response.statusCode < 300));
      });
      request.once('error', () => settle(due, false));
    };
    // Sends whatever has fallen due, then yields to the event loop so responses are read in between.
    const tick = () => {
      const elapsed = performance.now() - start;
      while (sent < total && sent * interval <= elapsed) send(start + sent++ * interval);
      if (sent < total) setImmediate(tick);
    };
    tick();
  });
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (quantile: number) => latencies[Math.min(latencies.length - 1, Math.floor(quantile * latencies.length))]!;
  return { requests: total, p50: round(at(0.5)), p99: round(at(0.99)), errors };
}

function round(milliseconds: number): number {
  return Math.round(milliseconds * 100) / 100;
}
