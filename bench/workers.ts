/**
 * `npm run bench:workers`: the server as operators run it (compiled, `node dist/src/main.js`) with
 * WORKERS=1 and WORKERS=2, on SQLite and on PostgreSQL, for a read (`GET /v1/posts/{postId}`, JWT, policy,
 * ETag, audit) and a write (`POST /v1/posts`). Reports requests/s, latency, non-2xx answers (a writer that
 * failed on SQLite's lock would show here) and the CPU time per request of the whole process tree — the
 * primary included — so that what node:cluster adds per request is visible. On a 2-core machine the load
 * generator shares the cores with the workers: judge CPU per request, not requests per second.
 *
 * All four servers run from the start, the ones not measured stopped (SIGSTOP); BENCH_ROUNDS rounds (default
 * 3) each measure one worker and two back to back, and the ratio is the median of the rounds' ratios.
 * BENCH_RATE=N sends N requests per second in all (open-loop) instead of as many as 50 connections can, so
 * that one worker and two are compared doing the same work.
 *
 * Rounds seconds apart still differ on a shared virtual machine (the same code measured 0.99x–1.19x from
 * one run to the next), so the ratio is also measured with both loaded at once, and that one gives the
 * verdict: BENCH_AT_ONCE_ROUNDS rounds (default 3) in which one worker and two, on the same database,
 * serve the same request at the same time, half the connections each, and each process tree's CPU time
 * per request is read over the same seconds. Whatever slows the machine down then slows both alike.
 */
import autocannon from 'autocannon';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { cpuMillis, freePort, loadAtOnce, median } from './processes.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const AT_ONCE_ROUNDS = Number(process.env.BENCH_AT_ONCE_ROUNDS ?? 3);
const WARMUP = 2;
/** Per server and request, once, before the first round. */
const START_WARMUP = 5;
const CONNECTIONS = 50;
const RATE = process.env.BENCH_RATE ? Number(process.env.BENCH_RATE) : null;
const POSTGRES_URL = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const CLIENT_SECRET = 'bench-admin-client-secret-0123456789abcdefghij';

/** The server and every process it started (the workers). */
function processTree(pid: number): number[] {
  const children = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);
  return [pid, ...children.flatMap(processTree)];
}

function treeCpuMillis(pid: number): number {
  return processTree(pid).reduce((sum, p) => {
    try {
      return sum + cpuMillis(p);
    } catch {
      return sum; // exited in between
    }
  }, 0);
}

interface Running {
  child: ChildProcess;
  base: string;
  /** The server's warnings and errors so far (LOG_LEVEL=warn: nothing else is logged), by message, with their counts. */
  problems: () => Map<string, number>;
  cleanup: () => Promise<void>;
}

// The compiled server, rebuilt first when src/ is newer than dist/.
if (spawnSync(process.execPath, ['bin/build.js', '--if-stale'], { stdio: 'inherit' }).status !== 0) throw new Error('the build failed');

async function start(workers: number, database: 'sqlite' | 'postgres'): Promise<Running> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-bench-workers-'));
  let databaseUrl: string | null = null;
  let dropDatabase = async () => {};
  if (database === 'postgres') {
    const name = `portcullis_bench_${process.pid}_${workers}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    await admin.query(`create database ${name}`);
    await admin.end();
    const url = new URL(POSTGRES_URL);
    url.pathname = `/${name}`;
    databaseUrl = url.toString();
    dropDatabase = async () => {
      const c = new pg.Client({ connectionString: POSTGRES_URL });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    };
  }
  // What the server logs (its warnings and errors) goes to a file, printed by message at the end.
  const logFile = path.join(dataDir, 'server.log');
  const log = fs.openSync(logFile, 'a');
  const child = spawn(process.execPath, ['dist/src/main.js'], {
    stdio: ['ignore', log, 'inherit'],
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      ISSUER: 'https://bench.invalid',
      KEY_ENCRYPTION_SECRET: 'bench-key-encryption-secret-0123456789abcdef',
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      WORKERS: String(workers),
      LOG_LEVEL: 'warn',
      RATE_LIMIT_MAX: '1000000',
      RATE_LIMIT_ADDRESS_MAX: '1000000',
      RATE_LIMIT_ANONYMOUS_MAX: '1000000',
      RATE_LIMIT_WINDOW: '1',
      MAX_CONNECTIONS_PER_ADDRESS: '0',
      BOOTSTRAP_CLIENT_ID: 'bench-admin',
      BOOTSTRAP_CLIENT_SECRET: CLIENT_SECRET,
    },
  });
  const base = `http://127.0.0.1:${port}`;
  for (let attempt = 0; ; attempt++) {
    if (attempt > 200) throw new Error('the server did not start');
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    const live = await fetch(`${base}/healthz`).then((res) => res.ok, () => false);
    if (live) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  // Every worker listening (a few more requests land on each).
  await new Promise((resolve) => setTimeout(resolve, workers > 1 ? 2000 : 200));
  fs.closeSync(log);
  return {
    child,
    base,
    problems: () => logProblems(fs.readFileSync(logFile, 'utf8')),
    cleanup: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      await dropDatabase();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** pino's JSON lines by message (with the error's message when there is one), counted. */
function logProblems(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let key: string;
    try {
      const entry = JSON.parse(line) as { msg?: string; err?: { message?: string } };
      key = entry.err?.message ? `${entry.msg ?? ''}: ${entry.err.message}` : (entry.msg ?? line);
    } catch {
      key = line;
    }
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

async function token(base: string): Promise<string> {
  const res = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`bench-admin:${CLIENT_SECRET}`).toString('base64')}` },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'read:posts write:posts' }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
}

interface Row {
  scenario: string;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  non2xx: number;
  cpuMicrosPerRequest: number;
  /** Of which the primary's (WORKERS > 1): the rate-limit counters and the relaying it does for the workers. */
  primaryMicrosPerRequest: number | null;
  /** What the non-2xx were (status codes, connection errors, timeouts), or null. */
  failures: string | null;
}

function describeFailures(result: autocannon.Result): string | null {
  const statuses = Object.entries(result.statusCodeStats ?? {})
    .filter(([code]) => !code.startsWith('2'))
    .map(([code, { count }]) => `${count ?? 0} x ${code}`);
  if (result.errors > 0) statuses.push(`${result.errors} connection errors`);
  if (result.timeouts > 0) statuses.push(`${result.timeouts} timeouts`);
  return statuses.length > 0 ? statuses.join(', ') : null;
}

async function measure(scenario: string, server: Running, options: autocannon.Options): Promise<Row> {
  await autocannon({ ...options, connections: CONNECTIONS, duration: WARMUP });
  const pid = server.child.pid!;
  const before = treeCpuMillis(pid);
  const primaryBefore = cpuMillis(pid);
  const result = await autocannon({ ...options, connections: CONNECTIONS, duration: DURATION, ...(RATE ? { overallRate: RATE } : {}) });
  const after = treeCpuMillis(pid);
  const primaryAfter = cpuMillis(pid);
  const workers = processTree(pid).length > 1;
  const requests = result.requests.total;
  return {
    scenario,
    requestsPerSecond: Math.round(requests / DURATION),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx + result.errors + result.timeouts,
    failures: describeFailures(result),
    cpuMicrosPerRequest: Math.round(((after - before) * 1000) / Math.max(1, requests)),
    primaryMicrosPerRequest: workers ? Math.round(((primaryAfter - primaryBefore) * 1000) / Math.max(1, requests)) : null,
  };
}

/** A running server's processes (the primary and its workers) stopped or resumed together. */
function signalTree(server: Running, signal: 'SIGSTOP' | 'SIGCONT'): void {
  for (const pid of processTree(server.child.pid!)) {
    try {
      process.kill(pid, signal);
    } catch {
      // exited in between
    }
  }
}

interface Target {
  database: 'sqlite' | 'postgres';
  workers: number;
  server: Running;
  read: autocannon.Options;
  write: autocannon.Options;
}

async function prepare(database: 'sqlite' | 'postgres', workers: number): Promise<Target> {
  const server = await start(workers, database);
  const bearer = await token(server.base);
  const headers = { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' };
  const created = await fetch(`${server.base}/v1/posts`, { method: 'POST', headers, body: JSON.stringify({ title: 'Bench', body: 'text', status: 'published' }) });
  const { id } = (await created.json()) as { id: string };
  return {
    database,
    workers,
    server,
    read: { url: `${server.base}/v1/posts/${id}`, headers },
    write: { url: `${server.base}/v1/posts`, method: 'POST', headers, body: JSON.stringify({ title: 'Written under load', body: 'text', status: 'draft' }) },
  };
}

const KINDS = { read: 'GET /v1/posts/{postId}', write: 'POST /v1/posts' } as const;
const databases = (process.env.BENCH_DATABASES ?? 'sqlite,postgres').split(',') as ('sqlite' | 'postgres')[];
const targets: Target[] = [];
for (const database of databases) for (const workers of [1, 2]) targets.push(await prepare(database, workers));
// Only the server measured runs: the others are stopped, so that their background work (a WAL checkpoint,
// an audit flush, a lease returned) lands in nobody's figures.
for (const target of targets) signalTree(target.server, 'SIGSTOP');
// A server just started runs its code unoptimised until V8 has compiled it: a first measurement of two
// workers, each of which had half the warm-up, would be charged for that. Every server first serves reads
// and writes alone for a while, measured by nobody.
for (const target of targets) {
  signalTree(target.server, 'SIGCONT');
  try {
    for (const kind of ['read', 'write'] as const) await autocannon({ ...target[kind], connections: CONNECTIONS, duration: START_WARMUP });
  } finally {
    signalTree(target.server, 'SIGSTOP');
  }
}

/**
 * Each round measures one worker and two back to back for every database and request (which goes first
 * alternates between rounds), and a ratio is taken within a round: this machine's speed drifts by a third
 * between minutes, more than the difference measured.
 */
const rows = new Map<string, Row[]>();
/** Each server's warnings and errors, read before it is stopped for good. */
const logged = new Map<string, Map<string, number>>();
const ratios = new Map<string, number[]>();
/** The same ratios, one worker and two loaded at once. */
const atOnceRatios = new Map<string, number[]>();
let atOnceFailures = 0;
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const database of databases) {
      for (const kind of ['read', 'write'] as const) {
        const pair = targets.filter((target) => target.database === database);
        const order = round % 2 === 0 ? pair : [...pair].reverse();
        const measured = new Map<number, Row>();
        for (const target of order) {
          const scenario = `${database}, WORKERS=${target.workers}: ${KINDS[kind]}`;
          signalTree(target.server, 'SIGCONT');
          try {
            measured.set(target.workers, await measure(scenario, target.server, target[kind]));
          } finally {
            signalTree(target.server, 'SIGSTOP');
          }
          rows.set(scenario, [...(rows.get(scenario) ?? []), measured.get(target.workers)!]);
        }
        const key = `${database}, ${KINDS[kind]}`;
        ratios.set(key, [...(ratios.get(key) ?? []), measured.get(2)!.cpuMicrosPerRequest / measured.get(1)!.cpuMicrosPerRequest]);
      }
    }
  }
  for (let round = 0; round < AT_ONCE_ROUNDS; round++) {
    for (const database of databases) {
      for (const kind of ['read', 'write'] as const) {
        const pair = targets.filter((target) => target.database === database);
        for (const target of pair) signalTree(target.server, 'SIGCONT');
        try {
          const [one, two] = await loadAtOnce(
            [1, 2].map((workers) => {
              const target = pair.find((candidate) => candidate.workers === workers)!;
              return { options: { ...target[kind], connections: CONNECTIONS / 2 }, cpuMillis: () => treeCpuMillis(target.server.child.pid!) };
            }),
            WARMUP,
            DURATION,
          );
          atOnceFailures += one!.errors + two!.errors;
          const key = `${database}, ${KINDS[kind]}`;
          atOnceRatios.set(key, [...(atOnceRatios.get(key) ?? []), two!.cpuMicrosPerRequest / one!.cpuMicrosPerRequest]);
        } finally {
          for (const target of pair) signalTree(target.server, 'SIGSTOP');
        }
      }
    }
  }
} finally {
  for (const target of targets) {
    signalTree(target.server, 'SIGCONT');
    logged.set(`${target.database}, WORKERS=${target.workers}`, target.server.problems());
    await target.server.cleanup();
  }
}

console.log(`${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, Node ${process.version}, unpinned (the workers and the load generator share the cores)`);
console.log(
  `${CONNECTIONS} connections${RATE ? `, ${RATE} requests/s in all` : ''}, ${ROUNDS} rounds of ${WARMUP} s warm-up and ${DURATION} s measured per scenario; ` +
    'CPU time of the primary and every worker; medians\n',
);
console.log('| scenario | req/s | p50 ms | p99 ms | non-2xx | CPU µs/req | of which the primary |');
console.log('|---|---|---|---|---|---|---|');
for (const [scenario, runs] of rows) {
  const primary = runs.map((run) => run.primaryMicrosPerRequest).filter((value) => value !== null);
  console.log(
    `| ${scenario} | ${Math.round(median(runs.map((run) => run.requestsPerSecond)))} | ${median(runs.map((run) => run.p50))} | ${median(runs.map((run) => run.p99))} | ` +
      `${runs.reduce((sum, run) => sum + run.non2xx, 0)} | ${Math.round(median(runs.map((run) => run.cpuMicrosPerRequest)))} | ${primary.length > 0 ? Math.round(median(primary)) : '-'} |`,
  );
}
for (const [scenario, runs] of rows) {
  runs.forEach((run, round) => {
    if (run.failures !== null) console.log(`\n${scenario}, round ${round + 1}: ${run.failures}`);
  });
}
for (const [server, problems] of logged) {
  if (problems.size === 0) continue;
  console.log(`\n${server} logged:`);
  for (const [message, count] of problems) console.log(`- ${count} x ${message.slice(0, 300)}`);
}
console.log('\nCPU per request, WORKERS=2 against WORKERS=1, measured one after the other (median of the rounds\' ratios; each round\'s in brackets):');
for (const [key, values] of ratios) {
  console.log(`- ${key}: ${median(values).toFixed(2)}x (${values.map((value) => value.toFixed(2)).join(', ')})`);
}
if (atOnceRatios.size > 0) {
  console.log(`\nCPU per request, WORKERS=2 against WORKERS=1, loaded at once (target: at most 1.15x; ${atOnceFailures} non-2xx answers):`);
  for (const [key, values] of atOnceRatios) {
    const ratio = median(values);
    console.log(`- ${key}: ${ratio.toFixed(2)}x (${values.map((value) => value.toFixed(2)).join(', ')}): ${ratio <= 1.15 ? 'within' : 'over'} the target`);
  }
}
// A run that answered anything but 2xx measured something else than the requests it names.
if (atOnceFailures > 0 || [...rows.values()].some((runs) => runs.some((run) => run.non2xx > 0))) process.exitCode = 1;
