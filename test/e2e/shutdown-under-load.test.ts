import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openCliDatabase } from '../cli/cli-process.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { startServer, waitUntilLive, type Running } from '../helpers/server-process.js';

// SIGTERM while clients write and read over keep-alive connections: the request in flight is answered, new
// connections are refused from then on, the process stops once the last answer is out (not at the drain
// deadline), the audit log is flushed and the exit code is 0. Every request answered 2xx has exactly its
// event in audit_events, and no other request has one.

const CLIENTS = 6;
const PAUSE_MS = 5;
const MAX_REQUESTS_PER_CLIENT = 2000;
const CLOSING = { error: { code: 'UNAVAILABLE', message: 'The server is shutting down; retry.' } };

interface Answer {
  status: number;
  requestId: string | null;
  retryAfter: string | null;
  body: string;
}

async function adminToken(server: Running): Promise<string> {
  const { clients } = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'bootstrap.json'), 'utf8')) as {
    clients: { admin: { client_id: string; client_secret: string } };
  };
  const res = await fetch(`${server.base}/oauth/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${clients.admin.client_id}:${clients.admin.client_secret}`).toString('base64')}`,
    },
    body: 'grant_type=client_credentials',
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Writes and reads until the server stops answering (a refused or closed connection ends the client). */
async function client(server: Running, token: string, n: number, answers: Answer[]): Promise<void> {
  let lastPost: string | null = null;
  for (let i = 0; i < MAX_REQUESTS_PER_CLIENT; i++) {
    const write = i % 2 === 0 || lastPost === null;
    let res: Response;
    try {
      res = await fetch(write ? `${server.base}/v1/posts` : `${server.base}/v1/posts/${lastPost}`, {
        method: write ? 'POST' : 'GET',
        headers: { authorization: `Bearer ${token}`, ...(write ? { 'content-type': 'application/json' } : {}) },
        body: write ? JSON.stringify({ title: `c${n} #${i}`, body: 'load', status: 'draft' }) : undefined,
      });
    } catch {
      return;
    }
    const answer = { status: res.status, requestId: res.headers.get('x-request-id'), retryAfter: res.headers.get('retry-after'), body: await res.text() };
    answers.push(answer);
    if (write && res.status === 201) lastPost = (JSON.parse(answer.body) as { id: string }).id;
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
  }
}

/** Whether a new TCP connection to the server is refused. */
function connectionRefused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

describe.each(DATABASE_KINDS)('SIGTERM under load on %s', (kind) => {
  it('answers the request in flight, refuses new connections, flushes the audit log and exits 0', { timeout: 60_000 }, async () => {
    const database = await openCliDatabase(kind);
    try {
      const server = await startServer({
        ...database.env,
        LOG_LEVEL: 'warn',
        RATE_LIMIT_MAX: '1000000',
        RATE_LIMIT_ANONYMOUS_MAX: '1000000',
        RATE_LIMIT_ADDRESS_MAX: '1000000',
      }, database.env.DATA_DIR);
      await waitUntilLive(server);
      const token = await adminToken(server);
      const port = Number(new URL(server.base).port);

      const answers: Answer[] = [];
      const load = Promise.all(Array.from({ length: CLIENTS }, (_, n) => client(server, token, n, answers)));
      await new Promise((resolve) => setTimeout(resolve, 1000));

      // A write whose body is still arriving when SIGTERM comes.
      const body = JSON.stringify({ title: 'In flight', body: 'sent in two parts', status: 'draft' });
      const slow = net.connect(port, '127.0.0.1');
      let raw = '';
      slow.on('data', (chunk) => (raw += chunk));
      const slowClosed = new Promise((resolve) => slow.on('close', resolve));
      await new Promise((resolve) => slow.once('connect', resolve));
      slow.write(
        `POST /v1/posts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`,
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      server.child.kill('SIGTERM');

      // While that request is still open, new connections are refused.
      let refused = await connectionRefused(port);
      for (let i = 0; i < 40 && !refused; i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        refused = await connectionRefused(port);
      }
      expect(refused).toBe(true);
      expect(server.child.exitCode).toBeNull();

      slow.write(body.slice(10));
      const answered = Date.now();
      await Promise.race([slowClosed, server.exited]);
      await load;
      expect(await server.exited).toBe(0);
      // Drained as soon as the last request was answered: no idle keep-alive connection holds the process
      // until the drain deadline (15 s).
      expect(Date.now() - answered).toBeLessThan(5000);

      const inFlight = raw.split('\r\n');
      expect(inFlight[0]).toBe('HTTP/1.1 201 Created');
      const inFlightId = inFlight.find((line) => line.toLowerCase().startsWith('x-request-id: '))!.slice('x-request-id: '.length);
      expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toMatchObject({ title: 'In flight', status: 'draft' });

      // Every other answer is a success, or the refusal of a request that came on an open connection after SIGTERM.
      for (const answer of answers) {
        if (answer.status === 503) {
          expect({ body: JSON.parse(answer.body), retryAfter: answer.retryAfter }).toEqual({ body: CLOSING, retryAfter: '1' });
        } else {
          expect([200, 201]).toContain(answer.status);
        }
      }
      const served = [...answers.filter((a) => a.status === 200 || a.status === 201).map((a) => a.requestId!), inFlightId];
      expect(served.length).toBeGreaterThan(CLIENTS);

      // Written before the process exited: one event per answered request, none for a refused one.
      const rows = await database.db.kysely
        .selectFrom('auditEvents')
        .select('requestId')
        .where('operation', 'in', ['createPost', 'getPost'])
        .execute();
      expect(rows.map((row) => row.requestId).sort()).toEqual(served.sort());
      const posts = await database.db.kysely.selectFrom('posts').select('id').execute();
      expect(posts.length).toBe(answers.filter((a) => a.status === 201).length + 1);
      expect(server.output()).not.toMatch(/audit\.(write_failed|unwritten)/);
    } finally {
      await database.close();
    }
  });
});
