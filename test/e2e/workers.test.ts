import { createClient, type Client } from 'graphql-ws';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { openCliDatabase, runCli, type CliDatabase } from '../cli/cli-process.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { freePort, startServer, waitUntilLive, type Running } from '../helpers/server-process.js';

// WORKERS=2: one port, two server processes behind it (node:cluster), on one database without Redis. The
// first worker prepares an empty database alone; writes from both make one audit chain; the primary keeps
// the shared rate-limit counters and relays events and invalidation notices; metrics are summed; SIGTERM
// drains both and exits 0.

const RATE_LIMIT = 40;

/**
 * One request on a connection of its own: the primary hands each new connection to the next worker, so
 * requests on one kept-alive connection would all reach the same one.
 */
function send(base: string, method: string, url: string, headers: Record<string, string>, body?: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
    const request = http.request(`${base}${url}`, { method, headers, agent: false }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, text }));
    });
    request.on('error', reject);
    request.end(body);
  });
}

async function form(base: string, url: string, fields: Record<string, string>, auth: [string, string]) {
  const res = await send(base, 'POST', url, { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${auth[0]}:${auth[1]}`).toString('base64')}` }, new URLSearchParams(fields).toString());
  return { status: res.status, body: res.text ? (JSON.parse(res.text) as Record<string, unknown>) : {} };
}

async function api(base: string, token: string, method: string, url: string, body?: unknown) {
  const res = await send(base, method, url, { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body === undefined ? undefined : JSON.stringify(body));
  return { status: res.status, headers: res.headers, body: res.text ? (JSON.parse(res.text) as Record<string, unknown>) : null };
}

/** The pids that answered requests, from the request log lines. */
function answeringPids(server: Running): Set<number> {
  const pids = new Set<number>();
  for (const line of server.output().split('\n')) {
    if (!line.includes('"msg":"request completed"')) continue;
    pids.add((JSON.parse(line) as { pid: number }).pid);
  }
  return pids;
}

const sockets: Client[] = [];
afterEach(async () => {
  for (const client of sockets.splice(0)) await client.dispose();
});

/** Starting a cluster and its first worker's preparation of an empty database take seconds on a busy machine. */
const CLUSTER_TEST_TIMEOUT = 90_000;

describe.each(DATABASE_KINDS)('WORKERS=2 on %s', (kind) => {
  async function setUp(env: Record<string, string> = {}) {
    const database: CliDatabase = await openCliDatabase(kind);
    // SQLite: the server creates the database in an empty DATA_DIR of its own; the CLI then uses that.
    const dataDir = kind === 'sqlite' ? database.env.DATA_DIR! : undefined;
    if (kind === 'sqlite') {
      await database.db.close();
      fs.rmSync(path.join(dataDir!, 'portcullis.db'), { force: true });
      for (const suffix of ['-wal', '-shm']) fs.rmSync(path.join(dataDir!, `portcullis.db${suffix}`), { force: true });
    }
    const metricsPort = await freePort();
    const server = await startServer(
      { ...database.env, WORKERS: '2', METRICS_PORT: String(metricsPort), RATE_LIMIT_MAX: String(RATE_LIMIT), RATE_LIMIT_ADDRESS_MAX: '100000', RATE_LIMIT_ANONYMOUS_MAX: '100000', ...env },
      dataDir,
    );
    await waitUntilLive(server);
    // Both workers are up once both have logged their start.
    await expect.poll(() => server.output().match(/"msg":"Server listening at/g)?.length ?? 0, { timeout: 15_000, interval: 100 }).toBe(2);
    const bootstrap = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'bootstrap.json'), 'utf8')) as { clients: { admin: { client_id: string; client_secret: string } } };
    const admin: [string, string] = [bootstrap.clients.admin.client_id, bootstrap.clients.admin.client_secret];
    const token = async (scope: string, credentials = admin) => {
      const res = await form(server.base, '/oauth/token', { grant_type: 'client_credentials', scope }, credentials);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return String(res.body.access_token);
    };
    const cli = async (args: string[]) => {
      const result = await runCli([...args, '--json'], kind === 'sqlite' ? { DATA_DIR: server.dataDir } : database.env);
      expect(result.stderr).toBe('');
      return { code: result.code, out: JSON.parse(result.stdout) as Record<string, unknown> };
    };
    return { database, server, metricsPort, admin, token, cli, close: () => (kind === 'sqlite' ? Promise.resolve() : database.close()) };
  }

  it('prepares an empty database once, and both workers write one audit chain; SIGTERM drains them and exits 0', async () => {
    const t = await setUp();
    try {
      const { out: clients } = await t.cli(['clients', 'list']);
      // One bootstrap admin client, although two workers started on the empty database.
      expect((clients as unknown as unknown[]).length).toBe(1);
      const writer = await t.token('write:posts read:posts');
      const created: number[] = [];
      // 40 writes, 8 at a time: the two workers take turns on the one SQLite writer lock without failing.
      for (let round = 0; round < 5; round++) {
        const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => api(t.server.base, writer, 'POST', '/v1/posts', { title: `w${round}-${i}`, body: 'text', status: 'draft' })));
        created.push(...answers.map((answer) => answer.status));
      }
      expect(created).toEqual(Array(40).fill(201));
      expect(answeringPids(t.server).size).toBe(2);

      t.server.child.kill('SIGTERM');
      expect(await t.server.exited).toBe(0);
      expect(t.server.output()).toContain('"msg":"cluster.stopped"');
      const verified = await t.cli(['audit', 'verify']);
      expect(verified.code).toBe(0);
      expect(verified.out).toMatchObject({ ok: true });
      expect(Number(verified.out.events)).toBeGreaterThanOrEqual(40);
    } finally {
      await t.close();
    }
  }, CLUSTER_TEST_TIMEOUT);

  it("shares one rate-limit budget, relays events and revocations between the workers, and sums their metrics", async () => {
    const t = await setUp();
    try {
      const { out: created } = await t.cli(['clients', 'create', '--name', 'Limited', '--type', 'confidential', '--grant', 'client_credentials', '--role', 'editor', '--scope', 'read:posts', '--scope', 'write:posts']);
      const limited: [string, string] = [String(created.clientId), String(created.clientSecret)];
      const token = await t.token('read:posts write:posts', limited);
      const statuses: number[] = [];
      for (let i = 0; i < RATE_LIMIT; i++) statuses.push((await api(t.server.base, token, 'GET', '/v1/posts?limit=1')).status);
      expect(statuses).toEqual(Array(RATE_LIMIT).fill(200));
      expect(answeringPids(t.server).size).toBe(2);
      // Whichever worker answers, the budget is spent.
      for (let i = 0; i < 4; i++) {
        const refused = await api(t.server.base, token, 'GET', '/v1/posts?limit=1');
        expect(refused.status).toBe(429);
        expect(refused.headers['retry-after']).toMatch(/^\d+$/);
        expect(refused.body).toEqual({ error: { code: 'RATE_LIMITED', message: expect.stringMatching(/^Too many requests; retry in \d+ s\.$/) } });
      }

      // A subscriber on one worker hears of posts written through either.
      const reader = await t.token('read:posts');
      const events: unknown[] = [];
      const client = createClient({ url: `${t.server.base.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${reader}` }, lazy: false, retryAttempts: 0, onNonLazyError: () => {} });
      sockets.push(client);
      await new Promise<void>((resolve) => client.on('connected', () => resolve()));
      client.subscribe({ query: 'subscription { postPublished { title } }' }, { next: (result) => events.push(result), error: () => {}, complete: () => {} });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const writer = await t.token('write:posts read:posts');
      for (let i = 0; i < 4; i++) expect((await api(t.server.base, writer, 'POST', '/v1/posts', { title: `p${i}`, body: 'text', status: 'published' })).status).toBe(201);
      await expect.poll(() => events.length, { timeout: 2000, interval: 20 }).toBe(4);
      expect(events).toEqual(expect.arrayContaining([0, 1, 2, 3].map((i) => ({ data: { postPublished: { title: `p${i}` } } }))));

      // A token both workers verified and cached is refused by both within a second of its revocation.
      const victim = await t.token('read:posts');
      for (let i = 0; i < 6; i++) expect((await api(t.server.base, victim, 'GET', '/v1/posts?limit=1')).status).toBe(200);
      expect((await form(t.server.base, '/oauth/revoke', { token: victim }, t.admin)).status).toBe(200);
      const start = Date.now();
      let refusedInARow = 0;
      while (refusedInARow < 6 && Date.now() - start < 1000) {
        refusedInARow = (await api(t.server.base, victim, 'GET', '/v1/posts?limit=1')).status === 401 ? refusedInARow + 1 : 0;
      }
      expect(refusedInARow).toBe(6);

      // One scrape of the primary: every worker's requests, summed.
      const text = await (await fetch(`http://127.0.0.1:${t.metricsPort}/metrics`)).text();
      const count = (status: number) =>
        text
          .split('\n')
          .filter((line) => line.startsWith('portcullis_requests_total{') && line.includes('operation="listPosts"') && line.includes(`status="${status}"`))
          .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
      // The 40 of the budget and the 6 before the revocation at least (and any answered before it took effect).
      expect(count(200)).toBeGreaterThanOrEqual(RATE_LIMIT + 6);
      expect(count(429)).toBe(4);

      // A worker that dies is replaced, and the port keeps answering meanwhile.
      const [victimPid] = [...answeringPids(t.server)];
      process.kill(victimPid!, 'SIGKILL');
      await expect.poll(() => t.server.output().match(/"msg":"Server listening at/g)?.length ?? 0, { timeout: 15_000, interval: 100 }).toBe(3);
      expect(t.server.output()).toContain('"msg":"cluster.worker_replaced"');
      for (let i = 0; i < 4; i++) expect((await api(t.server.base, reader, 'GET', '/v1/posts?limit=1')).status).toBe(200);
    } finally {
      await t.close();
    }
  }, CLUSTER_TEST_TIMEOUT);

  it('stops at once with the worker\'s one-line reason when the port is taken', async () => {
    const t = await openCliDatabase(kind);
    try {
      const port = await freePort();
      const holder = (await import('node:net')).createServer().listen(port, '127.0.0.1');
      await new Promise((resolve) => holder.once('listening', resolve));
      const server = await startServer({ ...t.env, WORKERS: '2', PORT: String(port) }, kind === 'sqlite' ? t.env.DATA_DIR : undefined);
      expect(await server.exited).toBe(1);
      expect(server.output()).toContain(`portcullis: cannot listen on 127.0.0.1:${port}: port ${port} is already in use`);
      holder.close();
    } finally {
      await t.close();
    }
  }, CLUSTER_TEST_TIMEOUT);
});

describe('WORKERS=2 and MAX_CONNECTIONS_PER_ADDRESS', () => {
  it('holds one address to the cap across the workers, not to the cap in each', async () => {
    const server = await startServer({ WORKERS: '2', MAX_CONNECTIONS_PER_ADDRESS: '4' });
    await waitUntilLive(server);
    await expect.poll(() => server.output().match(/"msg":"Server listening at/g)?.length ?? 0, { timeout: 15_000, interval: 100 }).toBe(2);
    const { port } = new URL(server.base);
    const sockets: import('node:net').Socket[] = [];
    try {
      // Ten idle connections, one after another: the primary hands them to the workers in turn.
      const answers: string[] = [];
      for (let i = 0; i < 10; i++) {
        const socket = (await import('node:net')).connect(Number(port), '127.0.0.1');
        sockets.push(socket);
        let received = '';
        socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
        const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
        await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
        // A refused connection is answered and closed at once; an admitted one stays open and silent.
        const outcome = await Promise.race([closed.then(() => 'refused'), new Promise<string>((resolve) => setTimeout(() => resolve('open'), 400))]);
        answers.push(outcome === 'refused' ? received.split('\r\n')[0]! : 'open');
      }
      // Each worker admits 2 (its share of 4); a connection the readiness check kept alive may hold one of
      // them. One cap in each worker would have admitted 7 or 8.
      const open = answers.filter((answer) => answer === 'open').length;
      expect(open).toBeGreaterThanOrEqual(3);
      expect(open).toBeLessThanOrEqual(4);
      expect(answers.filter((answer) => answer !== 'open')).toEqual(Array(10 - open).fill('HTTP/1.1 429 Too Many Requests'));
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  }, CLUSTER_TEST_TIMEOUT);
});
