import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/cli-process.js';
import { POSTGRES_BINARIES, startPrivatePostgres, type PrivatePostgres } from '../helpers/private-postgres.js';
import { startServer, waitUntilLive, type Running } from '../helpers/server-process.js';

// PostgreSQL stops under load and comes back: the server answers 503 UNAVAILABLE with Retry-After meanwhile
// (never a 500, never a stack), /readyz says it is not ready, it serves again by itself once PostgreSQL is
// back, and every request it answered 2xx has its audit events in the table. The database is a cluster of
// this test's own (private-postgres.ts), never the one the other suites share.

/** Audit events a server may hold unwritten; small, so that the outage fills the buffer. */
const AUDIT_MAX_PENDING = 150;
const CLIENTS = 4;
/** Each client's pause between requests, and its most requests in all: the load is bounded either way. */
const PAUSE_MS = 10;
const MAX_REQUESTS_PER_CLIENT = 1500;
const RECOVERY_MS = 15_000;

type Phase = 'before' | 'outage' | 'recovering' | 'after';

interface Answer {
  phase: Phase;
  what: string;
  status: number;
  requestId: string | null;
  retryAfter: string | null;
  contentType: string | null;
  body: string;
}

const describeOutage = POSTGRES_BINARIES === null ? describe.skip : describe;

describeOutage('PostgreSQL stopped under load', () => {
  let postgres: PrivatePostgres;
  let server: Running;
  let token: string;

  beforeAll(async () => {
    postgres = await startPrivatePostgres();
  });

  afterAll(async () => {
    await postgres?.destroy();
  });

  async function send(what: string, url: string, init: RequestInit = {}): Promise<Omit<Answer, 'phase'>> {
    const res = await fetch(`${server.base}${url}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, ...(init.body ? { 'content-type': 'application/json' } : {}), ...init.headers },
    });
    return {
      what,
      status: res.status,
      requestId: res.headers.get('x-request-id'),
      retryAfter: res.headers.get('retry-after'),
      contentType: res.headers.get('content-type'),
      body: await res.text(),
    };
  }

  /** One client: a write, a read of what it wrote, a read that needs no database, a GraphQL query; again. */
  async function client(n: number, phase: () => Phase, stopped: () => boolean, answers: Answer[]): Promise<void> {
    let lastPost: string | null = null;
    for (let i = 0; i < MAX_REQUESTS_PER_CLIENT && !stopped(); i++) {
      const at = phase();
      let answer: Omit<Answer, 'phase'>;
      switch (i % 4) {
        case 0:
          answer = await send('createPost', '/v1/posts', { method: 'POST', body: JSON.stringify({ title: `c${n} #${i}`, body: 'load', status: 'published' }) });
          if (answer.status === 201) lastPost = (JSON.parse(answer.body) as { id: string }).id;
          break;
        case 1:
          answer = lastPost === null ? await send('listPosts', '/v1/posts?limit=5') : await send('getPost', `/v1/posts/${lastPost}`);
          break;
        case 2:
          answer = await send('getAuthorization', '/v1/authorization');
          break;
        default:
          answer = await send('graphql', '/graphql', { method: 'POST', body: JSON.stringify({ query: '{ posts(first: 3) { nodes { id title } } }' }) });
      }
      answers.push({ phase: at, ...answer });
      await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
    }
  }

  async function readyz(): Promise<Omit<Answer, 'phase'>> {
    const res = await fetch(`${server.base}/readyz`);
    return {
      what: 'readyz',
      status: res.status,
      requestId: res.headers.get('x-request-id'),
      retryAfter: res.headers.get('retry-after'),
      contentType: res.headers.get('content-type'),
      body: await res.text(),
    };
  }

  // fast: PostgreSQL ends every session with an error to its client; immediate: it is killed, and its clients
  // find their connections reset (a COMMIT may be lost unanswered).
  it.each(['fast', 'immediate'] as const)('stopped (%s): answers 503 UNAVAILABLE with Retry-After, recovers by itself and loses no audit event of a 2xx answer', { timeout: 60_000 }, async (mode) => {
    // A database of this run's own in the private cluster: the server bootstraps it on its first start.
    const url = new URL(postgres.url);
    url.pathname = `/outage_${mode}`;
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    await admin.query(`create database outage_${mode}`);
    await admin.end();
    server = await startServer({
      DATABASE_URL: url.toString(),
      LOG_LEVEL: 'info',
      AUDIT_MAX_PENDING: String(AUDIT_MAX_PENDING),
      RATE_LIMIT_MAX: '1000000',
      RATE_LIMIT_ANONYMOUS_MAX: '1000000',
      RATE_LIMIT_ADDRESS_MAX: '1000000',
    });
    await waitUntilLive(server);
    const bootstrap = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'bootstrap.json'), 'utf8')) as {
      clients: { admin: { client_id: string; client_secret: string } };
    };
    const tokenResponse = await fetch(`${server.base}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${bootstrap.clients.admin.client_id}:${bootstrap.clients.admin.client_secret}`).toString('base64')}`,
      },
      body: 'grant_type=client_credentials',
    });
    expect(tokenResponse.status).toBe(200);
    token = ((await tokenResponse.json()) as { access_token: string }).access_token;
    expect((await readyz()).status).toBe(200);

    let phase: Phase = 'before';
    let stopped = false;
    const answers: Answer[] = [];
    const load = Promise.all(Array.from({ length: CLIENTS }, (_, n) => client(n, () => phase, () => stopped, answers)));
    try {
      await new Promise((resolve) => setTimeout(resolve, 1500));
      phase = 'outage';
      await postgres.stop(mode);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const notReady = await readyz();
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(server.child.exitCode).toBeNull();

      phase = 'recovering';
      await postgres.start();
      const back = Date.now();
      let ready = await readyz();
      while (ready.status !== 200 && Date.now() - back < RECOVERY_MS) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        ready = await readyz();
      }
      let write = await send('createPost', '/v1/posts', { method: 'POST', body: JSON.stringify({ title: 'after', body: 'recovery', status: 'draft' }) });
      while (write.status !== 201 && Date.now() - back < RECOVERY_MS) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        write = await send('createPost', '/v1/posts', { method: 'POST', body: JSON.stringify({ title: 'after', body: 'recovery', status: 'draft' }) });
      }
      expect({ readyz: ready.status, write: write.status }).toEqual({ readyz: 200, write: 201 });
      answers.push({ phase: 'after', ...write });
      phase = 'after';
      await new Promise((resolve) => setTimeout(resolve, 1500));

      // While PostgreSQL was down: not ready, in the API's error shape.
      expect(notReady.status).toBe(503);
      expect(JSON.parse(notReady.body)).toEqual({ error: { code: 'UNAVAILABLE', message: 'The database is not reachable.' } });
      expect(Number(notReady.retryAfter)).toBeGreaterThan(0);
    } finally {
      stopped = true;
      await load;
    }

    // Every answer is a success or a 503 UNAVAILABLE with Retry-After, in its interface's error shape.
    const byStatus = (status: number) => answers.filter((a) => a.status === status).length;
    expect(answers.filter((a) => !(a.status >= 200 && a.status < 300) && a.status !== 503).map((a) => `${a.what} ${a.status} ${a.body}`)).toEqual([]);
    for (const answer of answers) {
      expect(answer.body).not.toMatch(/\n\s+at |node_modules|ECONNREFUSED|terminating connection/);
      expect(answer.requestId).toMatch(/^[0-9a-f-]{36}$/);
      if (answer.status !== 503) continue;
      expect(answer.contentType).toMatch(/^application\/(graphql-response\+)?json/);
      expect(Number(answer.retryAfter)).toBeGreaterThan(0);
      if (answer.what === 'graphql') {
        const body = JSON.parse(answer.body) as { data?: unknown; errors: { message: string; extensions: { code: string } }[] };
        expect(body.errors.map((e) => e.extensions.code)).toEqual(['UNAVAILABLE']);
      } else {
        const body = JSON.parse(answer.body) as { error: { code: string; message: string } };
        expect(body).toEqual({ error: { code: 'UNAVAILABLE', message: expect.any(String) } });
      }
    }
    const during = answers.filter((a) => a.phase === 'outage');
    expect(answers.filter((a) => a.phase === 'before' && a.status === 201).length).toBeGreaterThan(0);
    expect(during.filter((a) => a.status === 503).length).toBeGreaterThan(0);
    // What needs no database was still served, until the audit events waiting to be written reached the bound;
    // then requests were refused rather than their events dropped.
    expect(during.filter((a) => a.what === 'getAuthorization' && a.status === 200).length).toBeGreaterThan(0);
    expect(during.some((a) => a.status === 503 && a.body.includes('audit log'))).toBe(true);
    expect(answers.filter((a) => a.phase === 'after' && a.status === 201).length).toBeGreaterThan(0);
    expect(byStatus(500)).toBe(0);

    // Every request answered 2xx has its events in the table, written once PostgreSQL was back.
    const served = new Set(answers.filter((a) => a.status >= 200 && a.status < 300).map((a) => a.requestId!));
    const database = new pg.Client({ connectionString: url.toString() });
    await database.connect();
    try {
      const recorded = async () => {
        const { rows } = await database.query<{ request_id: string }>('select distinct request_id from audit_events where request_id = any($1)', [[...served]]);
        return new Set(rows.map((row) => row.request_id));
      };
      let found = await recorded();
      const deadline = Date.now() + 10_000;
      while (found.size < served.size && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        found = await recorded();
      }
      expect([...served].filter((id) => !found.has(id))).toEqual([]);
    } finally {
      await database.end();
    }

    // The log says when the audit log filled up and when it took requests again, once each, rather than a
    // line per refused request.
    const log = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string; err?: { message?: string } });
    expect(log.filter((line) => line.msg.startsWith('audit.full')).length).toBeGreaterThan(0);
    expect(log.filter((line) => line.msg.startsWith('audit.accepting')).length).toBeGreaterThan(0);
    expect(log.filter((line) => line.err?.message?.includes('audit log cannot be written'))).toEqual([]);
    expect(log.filter((line) => line.level >= 60)).toEqual([]);

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    const verify = await runCli(['audit', 'verify', '--json'], { DATABASE_URL: url.toString() });
    expect({ code: verify.code, stderr: verify.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true });
  });
});

describeOutage('PostgreSQL that stops answering', () => {
  let postgres: PrivatePostgres;

  beforeAll(async () => {
    postgres = await startPrivatePostgres();
  });

  afterAll(async () => {
    await postgres?.destroy();
  });

  it('fails /readyz within its probe time while the database is frozen, and passes again once it answers', async () => {
    const server = await startServer({ DATABASE_URL: postgres.url });
    await waitUntilLive(server);
    const ready = async () => {
      const started = Date.now();
      const res = await fetch(`${server.base}/readyz`);
      return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json(), ms: Date.now() - started };
    };
    expect(await ready()).toMatchObject({ status: 200, body: { status: 'ready' } });
    postgres.freeze();
    try {
      const frozen = await ready();
      expect(frozen).toMatchObject({ status: 503, retryAfter: expect.stringMatching(/^\d+$/), body: { error: { code: 'UNAVAILABLE', message: 'The database is not reachable.' } } });
      // Two seconds of waiting for the database, not the probe's own timeout.
      expect(frozen.ms).toBeLessThan(3500);
      expect(server.child.exitCode).toBeNull();
    } finally {
      postgres.thaw();
    }
    await expect.poll(async () => (await ready()).status, { timeout: 10_000, interval: 200 }).toBe(200);
  }, 60_000);
});
