import http from 'node:http';
import { performance } from 'node:perf_hooks';

/** A response read whole, with the time from sending the request to its last byte (ms). */
export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  ms: number;
}

/** A request that got no answer: a socket error, or none within the timeout. */
export class NoAnswer extends Error {}

const TIMEOUT_MS = 30_000;

/**
 * One server instance as the load sees it: at most `connections` kept-alive sockets to 127.0.0.1:`port`,
 * shared by every loop that sends to it (a loop waiting for a free socket is charged for the wait).
 */
export class Target {
  readonly agent: http.Agent;

  constructor(
    readonly name: string,
    readonly port: number,
    connections: number,
  ) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections });
  }

  send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const request = http.request(
        { host: '127.0.0.1', port: this.port, method, path, agent: this.agent, headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) } },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.once('error', (error) => reject(new NoAnswer(error.message)));
          response.once('end', () =>
            resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - started }),
          );
        },
      );
      request.setTimeout(TIMEOUT_MS, () => request.destroy(new Error(`no answer within ${TIMEOUT_MS / 1000} s`)));
      request.once('error', (error) => reject(new NoAnswer(error.message)));
      request.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
