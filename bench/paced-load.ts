import net from 'node:net';
import { performance } from 'node:perf_hooks';

export interface PacedResult {
  requests: number;
  p50: number;
  p99: number;
  /** Responses other than 2xx, and failed requests. */
  errors: number;
  /** Times the generator's sending loop was held up for more than STALL_MS while counting, and the longest. */
  stalls: { count: number; longestMs: number };
}

/** A gap in the generator's sending loop longer than this counts as a stall of its own. */
const STALL_MS = 1;

/**
 * An open-loop load at a steady rate: request i is due at start + i / rate, whether or not earlier ones have
 * been answered, and its latency counts from when it was due, so a server that falls behind is charged for
 * the wait (no coordinated omission). autocannon's own rate option sends each second's quota in a burst at
 * the start of the second, which measures queueing again. Requests go over at most `connections` keep-alive
 * connections, one at a time on each; a request due while every connection is busy waits for the first free
 * one. Latencies are in milliseconds, with fractions.
 *
 * The client is written on bare sockets — one prepared request, responses read by their Content-Length —
 * so that its own work (a few microseconds a request) and garbage stay out of the tail it measures: Node's
 * HTTP client costs tens of microseconds a request and put about 2.5 ms into the p99 of a route that does
 * nothing.
 *
 * The first `warmupSeconds` are sent at the same rate over the same connections and not counted: the
 * measured requests then go over connections the server has been answering for seconds (a run that opened
 * its own connections counted their first tenths of a second, whose responses were several milliseconds
 * slow, in its tail). `onMeasureStart` is called when the first counted request falls due.
 *
 * The load generator's own hold-ups are counted too (`stalls`: the longest and the number of times its
 * sending loop did not run for more than STALL_MS while counted requests were due): a request that falls
 * due while the generator is held up is sent late, and its latency, counted from when it was due, carries
 * the generator's wait as well as the server's.
 */
export async function pacedLoad(options: {
  url: string;
  headers: Record<string, string>;
  rate: number;
  seconds: number;
  connections: number;
  warmupSeconds?: number;
  onMeasureStart?: () => void;
}): Promise<PacedResult> {
  const url = new URL(options.url);
  const fields = Object.entries({ host: url.host, ...options.headers }).map(([name, value]) => `${name}: ${value}\r\n`);
  const request = Buffer.from(`GET ${url.pathname}${url.search} HTTP/1.1\r\n${fields.join('')}\r\n`, 'latin1');
  const interval = 1000 / options.rate;
  const warmup = Math.round(options.rate * (options.warmupSeconds ?? 0));
  const counted = Math.round(options.rate * options.seconds);
  const total = warmup + counted;
  const latencies = new Float64Array(counted);
  let settled = 0;
  let recorded = 0;
  let errors = 0;
  let sent = 0;
  // Due times of requests waiting for a free connection, oldest first.
  const waiting: number[] = [];
  let waitingHead = 0;
  const idle: Connection[] = [];
  const open = new Set<Connection>();
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));

  let measuredFrom = Infinity;
  const settle = (due: number, ok: boolean) => {
    settled++;
    if (due >= measuredFrom) {
      latencies[recorded++] = performance.now() - due;
      if (!ok) errors++;
    }
    if (settled === total) finish();
  };

  class Connection {
    readonly socket: net.Socket;
    /** Due time of the request in flight, or null. */
    due: number | null = null;
    received: Buffer = Buffer.alloc(0);

    constructor() {
      this.socket = net.connect({ host: url.hostname, port: Number(url.port) });
      open.add(this);
      this.socket.setNoDelay(true);
      this.socket.on('data', (chunk: Buffer) => this.read(chunk));
      this.socket.on('error', () => {});
      this.socket.on('close', () => {
        // The server closed it: what was in flight failed; a new connection takes its place while load remains.
        if (this.due !== null) settle(this.due, false);
        this.due = null;
        open.delete(this);
        const at = idle.indexOf(this);
        if (at >= 0) idle.splice(at, 1);
        if (settled < total) new Connection().next();
      });
    }

    send(due: number): void {
      this.due = due;
      this.socket.write(request);
    }

    /** Takes the oldest waiting request, or becomes idle. */
    next(): void {
      if (waitingHead < waiting.length) this.send(waiting[waitingHead++]!);
      else idle.push(this);
    }

    read(chunk: Buffer): void {
      this.received = this.received.length === 0 ? chunk : Buffer.concat([this.received, chunk]);
      const headEnd = this.received.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const head = this.received.toString('latin1', 0, headEnd);
      const length = /\r\ncontent-length: *(\d+)/i.exec(head);
      const end = headEnd + 4 + (length ? Number(length[1]) : 0);
      if (this.received.length < end) return;
      const status = Number(head.slice(9, 12));
      this.received = this.received.subarray(end);
      const due = this.due!;
      this.due = null;
      settle(due, status >= 200 && status < 300);
      this.next();
    }
  }

  const connections = Array.from({ length: options.connections }, () => new Connection());
  await Promise.all(connections.map((c) => new Promise((resolve) => c.socket.once('connect', resolve))));
  idle.push(...connections);
  const start = performance.now();
  measuredFrom = start + warmup * interval;
  let lastTick = start;
  let stalls = 0;
  let longestStall = 0;
  // Sends whatever has fallen due, then yields to the event loop so responses are read in between.
  const tick = () => {
    const now = performance.now();
    const gap = now - lastTick;
    lastTick = now;
    if (gap > STALL_MS && now > measuredFrom) {
      stalls++;
      longestStall = Math.max(longestStall, gap);
    }
    const elapsed = now - start;
    while (sent < total && sent * interval <= elapsed) {
      if (sent === warmup) options.onMeasureStart?.();
      const due = start + sent++ * interval;
      const connection = idle.pop();
      if (connection) connection.send(due);
      else waiting.push(due);
    }
    if (sent < total) setImmediate(tick);
  };
  tick();
  await finished;
  for (const connection of open) connection.socket.destroy();
  latencies.sort();
  const at = (quantile: number) => latencies[Math.min(counted - 1, Math.floor(quantile * counted))]!;
  return { requests: counted, p50: round(at(0.5)), p99: round(at(0.99)), errors, stalls: { count: stalls, longestMs: round(longestStall) } };
}

function round(milliseconds: number): number {
  return Math.round(milliseconds * 100) / 100;
}
