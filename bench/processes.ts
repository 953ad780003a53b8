/**
 * The processes of a benchmark: the load generator pinned to CPU 0, each server in its own process pinned
 * to CPU 1 (when `taskset` and a second core exist), and the server's CPU time read from /proc, so that a
 * comparison made in one run shares the machine's speed of the moment.
 */
import autocannon from 'autocannon';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';

export const HAS_TASKSET = spawnSync('taskset', ['-V']).status === 0 && os.cpus().length >= 2;

/**
 * The load generator's young generation, in MB, fixed at its largest: with V8's default, which starts at
 * 1 MB, the generator of a steady rate collected its garbage 30 times a second, for up to 6 ms at a time,
 * and the responses that arrived meanwhile were read that much late and counted as the server's latency;
 * at 32 MB, half as often and rarely for over 1.5 ms.
 */
const LOAD_GENERATOR_HEAP = ['--min-semi-space-size=32', '--max-semi-space-size=32'];

/** Runs this script again under `taskset -c 0` (once) and exits with its status; a no-op once pinned. */
export function pinLoadGenerator(): void {
  if (!HAS_TASKSET || process.env.BENCH_PINNED === '1') return;
  const child = spawnSync('taskset', ['-c', '0', process.execPath, ...LOAD_GENERATOR_HEAP, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, BENCH_PINNED: '1' },
  });
  process.exit(child.status ?? 1);
}

export interface Server {
  child: ChildProcess;
  info: Record<string, any>;
}

export interface StartOptions {
  args?: string[];
  env?: Record<string, string>;
  /** Extra Node options, after tsx is loaded so that `--import` may name a TypeScript module. */
  nodeOptions?: string[];
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * The server script compiled as operators run the server: src/ as `npm run build` compiles it (dist/src/),
 * and the script with its neighbours in bench/servers/ transpiled beside it (dist/bench/servers/), so that
 * its `../../src/...` imports reach dist/src/. Run through tsx instead, every named function would be
 * wrapped by esbuild's keepNames helper, which costs the code with more closures (the pipeline) more than
 * the code with fewer (the references). BENCH_RUNTIME=tsx runs the TypeScript as it is.
 */
export function compiled(script: string): string {
  if (process.env.BENCH_RUNTIME === 'tsx' || !script.endsWith('.ts')) return script;
  const built = spawnSync(process.execPath, [path.join(ROOT, 'bin/build.js'), '--if-stale'], { stdio: 'inherit' });
  if (built.status !== 0) throw new Error('the build failed');
  const source = path.resolve(ROOT, script);
  const directory = path.dirname(source);
  const target = path.join(ROOT, 'dist', path.relative(ROOT, directory));
  fs.mkdirSync(target, { recursive: true });
  for (const name of fs.readdirSync(directory).filter((file) => file.endsWith('.ts'))) {
    const { code } = transformSync(fs.readFileSync(path.join(directory, name), 'utf8'), { loader: 'ts', format: 'esm', target: 'node20' });
    fs.writeFileSync(path.join(target, name.replace(/\.ts$/, '.js')), code);
  }
  return path.join(target, path.basename(source).replace(/\.ts$/, '.js'));
}

/** Starts `script` (compiled, see `compiled`) on CPU 1 and waits for its `{"bench": ...}` line on stdout. */
export async function startServer(script: string, options: StartOptions = {}): Promise<Server> {
  const { args = [], env = {}, nodeOptions = [] } = options;
  const command = HAS_TASKSET ? 'taskset' : process.execPath;
  const entry = compiled(script);
  const runtime = entry.endsWith('.ts') || nodeOptions.some((option) => option.endsWith('.ts')) ? ['--import', 'tsx'] : [];
  const argv = [...(HAS_TASKSET ? ['-c', '1', process.execPath] : []), ...runtime, ...nodeOptions, entry, ...args];
  const child = spawn(command, argv, {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      ...env,
      NODE_ENV: 'production',
      ISSUER: 'https://bench.invalid',
      KEY_ENCRYPTION_SECRET: 'bench-key-encryption-secret-0123456789abcdef',
    },
  });
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

export async function stopServer(server: Server): Promise<void> {
  if (server.child.exitCode !== null) return;
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.kill('SIGTERM');
  await exited;
}

export interface CoreStalls {
  seconds: number;
  /** Times the probe was held up for more than STALL_MS. */
  stalls: number;
  longestMs: number;
  lostMs: number;
}

/** A hold-up of the probe longer than this counts as a stall. */
export const STALL_MS = 0.5;

/**
 * What the machine alone takes from the servers' core: a process pinned to CPU 1 that only reads the clock,
 * for `seconds`, counts the times it was held up (another process, a kernel thread, the hypervisor running
 * another machine's work). Run while the servers are stopped; it shows what the machine alone puts into the
 * tail latency of any server on that core at that moment. Null when the processes are not pinned.
 */
export function probeCoreStalls(seconds: number): CoreStalls | null {
  if (!HAS_TASKSET) return null;
  const script = `
    const { performance } = require('node:perf_hooks');
    const end = performance.now() + ${seconds * 1000};
    let last = performance.now(), stalls = 0, longest = 0, lost = 0;
    for (;;) {
      const now = performance.now();
      const gap = now - last;
      if (gap > ${STALL_MS}) { stalls++; lost += gap; if (gap > longest) longest = gap; }
      last = now;
      if (now > end) break;
    }
    process.stdout.write(JSON.stringify({ seconds: ${seconds}, stalls, longestMs: longest, lostMs: lost }));`;
  const probe = spawnSync('taskset', ['-c', '1', process.execPath, '-e', script], { encoding: 'utf8' });
  if (probe.status !== 0) throw new Error(`the core probe failed: ${probe.stderr}`);
  return JSON.parse(probe.stdout) as CoreStalls;
}

/** User + system CPU time of a process, in milliseconds (Linux /proc). */
export function cpuMillis(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

/**
 * Loads run at once, each by its own autocannon, `warmupSeconds` uncounted and then `seconds` counted: each
 * one's requests, CPU time per request (its `cpuMillis` read before and after the counted seconds) and
 * non-2xx answers, errors and timeouts. Servers loaded together on the same cores share whatever the machine
 * does meanwhile, so the ratio of their CPU per request does not drift with it.
 */
export async function loadAtOnce(
  loads: readonly { options: autocannon.Options; cpuMillis: () => number }[],
  warmupSeconds: number,
  seconds: number,
): Promise<{ requests: number; cpuMicrosPerRequest: number; errors: number }[]> {
  if (warmupSeconds > 0) await Promise.all(loads.map(({ options }) => autocannon({ ...options, duration: warmupSeconds })));
  const before = loads.map((load) => load.cpuMillis());
  const results = await Promise.all(loads.map(({ options }) => autocannon({ ...options, duration: seconds })));
  return loads.map((load, i) => {
    const result = results[i]!;
    const requests = result.requests.total;
    return {
      requests,
      cpuMicrosPerRequest: ((load.cpuMillis() - before[i]!) * 1000) / Math.max(1, requests),
      errors: result.non2xx + result.errors + result.timeouts,
    };
  });
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** One line describing the run, printed above every table. */
export function describeMachine(connections: number, rounds: number, duration: number): string {
  return (
    `${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, Node ${process.version}, ${connections} connections, ` +
    `${rounds} rounds of ${duration} s per scenario${HAS_TASKSET ? ', server on CPU 1, load on CPU 0' : ', unpinned'}; medians`
  );
}

export { freePort } from '../test/helpers/free-port.js';
