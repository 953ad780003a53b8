/**
 * `npm run bench:instructions`: instructions executed per request by the server's main thread, counted by
 * valgrind's callgrind — a figure that does not drift with the machine's speed of the moment, so that a
 * change of a few percent shows (requests per second on this shared virtual machine move by ±30 % between
 * minutes). Each server runs the compiled code under callgrind with instrumentation off; after
 * BENCH_WARMUP requests (default 80,000: V8 has then optimised what the request path runs, and its
 * compiler threads are idle) instrumentation is switched on for BENCH_REQUESTS requests (default 5,000),
 * 10 connections. Only the main thread is counted: V8's compiler and GC helper threads, the WAL checkpoint
 * worker and libuv's pool do their work whenever they are scheduled. Instructions are not time — cache
 * misses and the kernel's share (the socket writes) are not in them — but what the code asks of the CPU.
 *
 * Servers: the hand-written equivalent (bench/servers/hand-written.ts), the pipeline with a JWT and with an
 * opaque token (bench/servers/pipeline.ts), and the hand-written code again in a process that has built the
 * whole server first (servers/hand-written-beside-app.ts). One server at a time, on CPU 1, the load generator
 * on CPU 0: the count does depend on what else runs, since a server that the load generator keeps waiting
 * answers fewer requests per event-loop turn and pays each turn's fixed work over fewer of them (two servers
 * and their load generators on the two cores, with a test suite beside them, counted the pipeline at 279k
 * where it counts 257k–262k alone).
 *
 * BENCH_CALLGRIND_DIR=dir keeps each server's dump of its main thread there (`<scenario>.callgrind`), for
 * `callgrind_annotate` to tell the count by function (V8's builtins and Node's native code by name; compiled
 * JavaScript only by address).
 */
import autocannon from 'autocannon';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { compiled, HAS_TASKSET, pinLoadGenerator } from './processes.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const WARMUP = Number(process.env.BENCH_WARMUP ?? 80_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5_000);
const KEEP_DIR = process.env.BENCH_CALLGRIND_DIR;

interface Scenario {
  name: string;
  script: string;
  token: 'token' | 'jwt' | 'opaque';
  args?: string[];
}

pinLoadGenerator();
if (spawnSync('valgrind', ['--version']).status !== 0) {
  console.error('valgrind is not installed (apt-get install -y valgrind): nothing measured.');
  process.exit(1);
}

// Compiled as the other benchmarks run them (bench/processes.ts): dist/src/ and the scripts beside it.
const HAND_WRITTEN = compiled('bench/servers/hand-written.ts');
const PIPELINE = compiled('bench/servers/pipeline.ts');
const BESIDE_APP = compiled('bench/servers/hand-written-beside-app.ts');
const SCENARIOS: Scenario[] = [
  { name: 'hand-written equivalent (same work, no layers)', script: HAND_WRITTEN, token: 'token' },
  { name: 'pipeline, JWT', script: PIPELINE, token: 'jwt' },
  { name: 'pipeline, opaque token', script: PIPELINE, token: 'opaque' },
  { name: 'hand-written equivalent, in a process that built the server', script: BESIDE_APP, token: 'token' },
];

async function measure(scenario: Scenario): Promise<{ count: number; info: Record<string, any> }> {
  const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-callgrind-'));
  const valgrind = ['--tool=callgrind', '--instr-atstart=no', '--separate-threads=yes', `--callgrind-out-file=${path.join(outDir, 'out')}`, process.execPath, scenario.script, ...(scenario.args ?? [])];
  const child = spawn(
    HAS_TASKSET ? 'taskset' : 'valgrind',
    HAS_TASKSET ? ['-c', '1', 'valgrind', ...valgrind] : valgrind,
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, NODE_ENV: 'production', ISSUER: 'https://bench.invalid', KEY_ENCRYPTION_SECRET: 'bench-key-encryption-secret-0123456789abcdef' },
    },
  );
  try {
    const line = await new Promise<string>((resolve, reject) => {
      readline.createInterface({ input: child.stdout! }).on('line', (l) => l.startsWith('{"bench":') && resolve(l));
      child.once('exit', (code) => reject(new Error(`${scenario.script} exited with ${code}`)));
    });
    const info = (JSON.parse(line) as { bench: Record<string, any> }).bench;
    const url = `http://127.0.0.1:${info.port}/v1/posts/${info.post.id}`;
    const headers = { authorization: `Bearer ${info[scenario.token]}` };
    await autocannon({ url, headers, connections: 10, amount: WARMUP, timeout: 60 });
    spawnSync('callgrind_control', ['--instr=on', String(child.pid)]);
    const result = await autocannon({ url, headers, connections: 10, amount: REQUESTS, timeout: 60 });
    spawnSync('callgrind_control', ['--instr=off', String(child.pid)]);
    spawnSync('callgrind_control', ['--dump', String(child.pid)]);
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${scenario.name}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
    // Thread 1 is the main thread: out.<n>-01.
    const dump = fs.readdirSync(outDir).find((file) => file.endsWith('-01'));
    const totals = dump ? /^totals: (\d+)/m.exec(fs.readFileSync(path.join(outDir, dump), 'utf8')) : null;
    if (!totals) throw new Error(`${scenario.name}: callgrind wrote no dump of the main thread`);
    if (KEEP_DIR) {
      fs.mkdirSync(KEEP_DIR, { recursive: true });
      fs.copyFileSync(path.join(outDir, dump!), path.join(KEEP_DIR, `${scenario.name.replace(/[^A-Za-z0-9]+/g, '-')}.callgrind`));
    }
    return { count: Number(totals[1]) / REQUESTS, info };
  } finally {
    child.kill('SIGKILL');
    fs.rmSync(outDir, { recursive: true, force: true });
  }
}

const counts = new Map<Scenario, number>();
// The pipeline first: the hand-written servers' token is as long as its JWT, so both parse as many bytes.
const [handWritten, jwt, opaque, besideApp] = SCENARIOS as [Scenario, Scenario, Scenario, Scenario];
const jwtRun = await measure(jwt);
counts.set(jwt, jwtRun.count);
counts.set(opaque, (await measure(opaque)).count);
const tokenLength = `--token-length=${String(jwtRun.info.jwt).length}`;
handWritten.args = [tokenLength];
besideApp.args = [tokenLength];
counts.set(handWritten, (await measure(handWritten)).count);
counts.set(besideApp, (await measure(besideApp)).count);
const reference = counts.get(SCENARIOS[0]!)!;
console.log(`\nNode ${process.version}; ${WARMUP} warm-up requests, then ${REQUESTS} counted; main thread only\n`);
console.log('| scenario | instructions/request | vs hand-written |');
console.log('|---|---|---|');
for (const scenario of SCENARIOS) {
  const count = counts.get(scenario)!;
  console.log(`| ${scenario.name} | ${Math.round(count / 1000)}k | ${(count / reference).toFixed(2)}x |`);
}
