/**
 * `npm run bench`: the full REST pipeline against a bare Fastify route, in one run, on one machine.
 * Each server runs in its own process pinned to CPU 1; the load generator (autocannon, 50 connections)
 * runs here, pinned to CPU 0. The pipeline runs with LOG_LEVEL=warn (audit events still go to the database),
 * and once more with the default LOG_LEVEL=info (request and audit log lines on stdout). Reports requests/s, p50/p99 latency, server CPU time per request, and
 * the pipeline/bare ratios. BENCH_DURATION (seconds, default 10) sets each measurement's length.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import readline from 'node:readline';
import autocannon from 'autocannon';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = 2;
const CONNECTIONS = 50;
const HAS_TASKSET = spawnSync('taskset', ['-V']).status === 0 && os.cpus().length >= 2;

if (HAS_TASKSET && process.env.BENCH_PINNED !== '1') {
  const child = spawnSync('taskset', ['-c', '0', process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, BENCH_PINNED: '1' },
  });
  process.exit(child.status ?? 1);
}

interface Server {
  child: ChildProcess;
  info: Record<string, any>;
}

async function startServer(script: string, args: string[] = [], env: Record<string, string> = {}): Promise<Server> {
  const command = HAS_TASKSET ? 'taskset' : process.execPath;
  const argv = [...(HAS_TASKSET ? ['-c', '1', process.execPath] : []), '--import', 'tsx', script, ...args];
  const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env, NODE_ENV: 'production', ISSUER: 'https://bench.invalid', KEY_ENCRYPTION_SECRET: 'bench-key-encryption-secret-0123456789abcdef' } });
  const line = await new Promise<string>((resolve, reject) => {
    // The server's log lines share stdout; its `{"bench": ...}` line says where it listens. Every line is
    // read, so that a server that logs never blocks on a full pipe.
    const lines = readline.createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      if (line.startsWith('{"bench":')) resolve(line);
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
  return { child, info: (JSON.parse(line) as { bench: Record<string, any> }).bench };
}

/** User + system CPU time of a process, in milliseconds (Linux /proc). */
function cpuMillis(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

interface Measurement {
  name: string;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  cpuMicrosPerRequest: number;
  non2xx: number;
}

async function measure(name: string, server: Server, path: string, headers: Record<string, string>): Promise<Measurement> {
  const url = `http://127.0.0.1:${server.info.port}${path}`;
  await autocannon({ url, connections: CONNECTIONS, duration: WARMUP, headers });
  const cpuBefore = cpuMillis(server.child.pid!);
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers });
  const cpuAfter = cpuMillis(server.child.pid!);
  const requests = result.requests.total;
  return {
    name,
    requestsPerSecond: Math.round(requests / DURATION),
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuMicrosPerRequest: Math.round(((cpuAfter - cpuBefore) * 1000) / Math.max(1, requests)),
    non2xx: result.non2xx + result.errors + result.timeouts,
  };
}

async function stop(server: Server): Promise<void> {
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  await exited;
}

const pipeline = await startServer('bench/servers/pipeline.ts', [], { LOG_LEVEL: 'warn' });
const logging = await startServer('bench/servers/pipeline.ts', [], { LOG_LEVEL: 'info' });
const bare = await startServer('bench/servers/bare.ts', [JSON.stringify(pipeline.info.post)]);
const path = `/v1/posts/${pipeline.info.post.id}`;

const results: Measurement[] = [];
try {
  results.push(await measure('bare Fastify route', bare, path, {}));
  results.push(await measure('pipeline, JWT', pipeline, path, { authorization: `Bearer ${pipeline.info.jwt}` }));
  results.push(await measure('pipeline, opaque token', pipeline, path, { authorization: `Bearer ${pipeline.info.opaque}` }));
  results.push(
    await measure('pipeline, JWT, LOG_LEVEL=info', logging, `/v1/posts/${logging.info.post.id}`, { authorization: `Bearer ${logging.info.jwt}` }),
  );
} finally {
  await stop(logging);
  await stop(pipeline);
  await stop(bare);
}

const baseline = results[0]!;
console.log(`\n${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, Node ${process.version}, ${CONNECTIONS} connections, ${DURATION} s each${HAS_TASKSET ? ', server on CPU 1, load on CPU 0' : ', unpinned'}\n`);
console.log('| scenario | req/s | p50 ms | p99 ms | server CPU µs/req | vs bare (req/s) | errors |');
console.log('|---|---|---|---|---|---|---|');
for (const r of results) {
  console.log(
    `| ${r.name} | ${r.requestsPerSecond} | ${r.p50} | ${r.p99} | ${r.cpuMicrosPerRequest} | ${(r.requestsPerSecond / baseline.requestsPerSecond).toFixed(2)}x | ${r.non2xx} |`,
  );
}
const failed = results.filter((r) => r.non2xx > 0);
if (failed.length > 0) {
  console.error(`\nnon-2xx responses or errors in: ${failed.map((r) => r.name).join(', ')}`);
  process.exitCode = 1;
}
