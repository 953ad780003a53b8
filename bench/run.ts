/**
 * `npm run bench`: the full REST pipeline against a bare Fastify route, in one run, on one machine.
 * Each server runs in its own process pinned to CPU 1; the load generator (autocannon, 50 connections)
 * runs here, pinned to CPU 0. The pipeline runs with LOG_LEVEL=warn (audit events still go to the database),
 * and once more with the default LOG_LEVEL=info (request and audit log lines on stdout). A hand-written
 * server doing the same work with no layers (servers/hand-written.ts) separates the cost of the work from
 * the cost of the pipeline's structure; the same server once more without its audit rows shows what the
 * durable audit row alone costs. Then the bare route, the hand-written server and the pipeline run once more
 * at one fixed rate below saturation (half of what the pipeline sustained), for latency without queueing.
 * Reports requests/s, p50/p99 latency, server CPU time per request, and the pipeline's ratios to the bare
 * route and to the hand-written server.
 *
 * The scenarios are measured in BENCH_ROUNDS rounds (default 3), each round running every scenario once
 * for BENCH_DURATION seconds (default 5): a ratio is taken within a round, between measurements made
 * seconds apart, and the table shows medians, so that a machine whose speed drifts (a shared virtual
 * machine) skews the ratio as little as possible. The target's ratio — the pipeline with a JWT against the
 * hand-written server — is then measured on its own: BENCH_PAIR_ROUNDS rounds (default 10) of the two
 * servers alone for PAIR_SECONDS each, back to back, which goes first alternating, so that each round's
 * ratio compares measurements seconds apart and neither server always follows the other.
 *
 * On a shared virtual machine even rounds seconds apart differ: the same code measured 0.65x–0.98x from one
 * round to the next. So the target's ratio is also measured with both loaded at once, which is what judges
 * it: BENCH_AT_ONCE_ROUNDS rounds (default 6) of AT_ONCE_SECONDS in which the pipeline and the hand-written
 * server are loaded at the same time (half the connections each), both on CPU 1, and each one's CPU time
 * per request is read. Whatever slows the machine down slows both alike, at the same moment; the ratio of
 * their CPU time per request is what the pipeline's structure costs (its rounds stayed within 0.78x–0.82x
 * where the alternating rounds spread over 0.68x–0.95x in the same run).
 */
import autocannon from 'autocannon';
import { pacedLoad } from './paced-load.js';
import {
  cpuMillis,
  describeMachine,
  loadAtOnce,
  median,
  pinLoadGenerator,
  probeCoreStalls,
  STALL_MS,
  startServer as startProcess,
  stopServer as stop,
  type CoreStalls,
  type Server,
} from './processes.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARMUP = 2;
const PACED_WARMUP = 5;
/** Rounds and seconds of the pipeline and the hand-written server measured alternately (the target's ratio). */
const PAIR_ROUNDS = Number(process.env.BENCH_PAIR_ROUNDS ?? 10);
const PAIR_SECONDS = 3;
/** Rounds and seconds of the pipeline and the hand-written server loaded at once (what judges the target). */
const AT_ONCE_ROUNDS = Number(process.env.BENCH_AT_ONCE_ROUNDS ?? 6);
const AT_ONCE_SECONDS = 5;
/** Seconds of each round the servers' core is probed for stalls, with every server stopped. */
const PROBE_SECONDS = 3;
const CONNECTIONS = 50;

pinLoadGenerator();

function startServer(script: string, args: string[] = [], env: Record<string, string> = {}): Promise<Server> {
  return startProcess(script, { args, env });
}

interface Measurement {
  name: string;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  cpuMicrosPerRequest: number;
  non2xx: number;
  /** The load generator's own hold-ups while it counted (steady rate only, see paced-load.ts). */
  loadStalls?: { count: number; longestMs: number };
}

/** One load's outcome as the load generator saw it. */
interface LoadResult {
  requests: number;
  p50: number;
  p99: number;
  errors: number;
  stalls?: { count: number; longestMs: number };
}
/** `warmup` seconds not counted, then `seconds` counted; `startCounting` is called in between. */
type Load = (url: string, headers: Record<string, string>, warmup: number, seconds: number, startCounting: () => void) => Promise<LoadResult>;

/** Saturating: autocannon's connections each send the next request as soon as the last is answered. */
const saturating: Load = async (url, headers, warmup, seconds, startCounting) => {
  if (warmup > 0) await autocannon({ url, connections: CONNECTIONS, duration: warmup, headers });
  startCounting();
  const result = await autocannon({ url, connections: CONNECTIONS, duration: seconds, headers });
  return {
    requests: result.requests.total,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.non2xx + result.errors + result.timeouts,
  };
};

/** A steady `rate` (see paced-load.ts), the warm-up at the same rate over the same connections. */
const steady =
  (rate: number): Load =>
  (url, headers, warmup, seconds, startCounting) =>
    pacedLoad({ url, headers, rate, seconds, connections: CONNECTIONS, warmupSeconds: warmup, onMeasureStart: startCounting });

/** Every server started, so that the one measured runs alone (see `measure`). */
const servers: Server[] = [];

/**
 * A warm-up, then the measured run, with the server's CPU time over the measured run. The other servers are
 * stopped (SIGSTOP) meanwhile: they share its core, and their own background work — a WAL checkpoint after
 * their saturated run, an audit flush, a timer — would otherwise land in its measurements.
 */
async function measure(
  name: string,
  server: Server,
  path: string,
  headers: Record<string, string>,
  load: Load,
  warmup: number,
  seconds = DURATION,
): Promise<Measurement> {
  const url = `http://127.0.0.1:${server.info.port}${path}`;
  return whileStopped(
    servers.filter((other) => other !== server),
    async () => {
      let cpuBefore = 0;
      const result = await load(url, headers, warmup, seconds, () => {
        cpuBefore = cpuMillis(server.child.pid!);
      });
      const cpuAfter = cpuMillis(server.child.pid!);
      return {
        name,
        requestsPerSecond: Math.round(result.requests / seconds),
        p50: result.p50,
        p99: result.p99,
        // Not rounded: the alternating rounds take ratios of it.
        cpuMicrosPerRequest: ((cpuAfter - cpuBefore) * 1000) / Math.max(1, result.requests),
        non2xx: result.errors,
        loadStalls: result.stalls,
      };
    },
  );
}

/** Two servers loaded at once (`loadAtOnce`), half the connections each, with the others stopped. */
function atOnce(pair: readonly { server: Server; path: string; headers: Record<string, string> }[], warmup: number, seconds: number) {
  const loads = pair.map(({ server, path, headers }) => ({
    options: { url: `http://127.0.0.1:${server.info.port}${path}`, connections: CONNECTIONS / 2, headers },
    cpuMillis: () => cpuMillis(server.child.pid!),
  }));
  return whileStopped(
    servers.filter((other) => !pair.some(({ server }) => server === other)),
    () => loadAtOnce(loads, warmup, seconds),
  );
}

/** Runs `work` with these servers stopped (SIGSTOP), and lets them go on afterwards. */
async function whileStopped<T>(stopped: readonly Server[], work: () => T | Promise<T>): Promise<T> {
  for (const server of stopped) server.child.kill('SIGSTOP');
  try {
    return await work();
  } finally {
    for (const server of stopped) server.child.kill('SIGCONT');
  }
}

const pipeline = await startServer('bench/servers/pipeline.ts', [], { LOG_LEVEL: 'warn' });
const logging = await startServer('bench/servers/pipeline.ts', [], { LOG_LEVEL: 'info' });
const bare = await startServer('bench/servers/bare.ts', [JSON.stringify(pipeline.info.post)]);
// The hand-written server's token is as long as the pipeline's JWT: both parse and look up as many bytes.
const tokenLength = `--token-length=${String(pipeline.info.jwt).length}`;
const handWritten = await startServer('bench/servers/hand-written.ts', [tokenLength]);
const handWrittenNoAudit = await startServer('bench/servers/hand-written.ts', [tokenLength, '--no-audit-rows']);
servers.push(pipeline, logging, bare, handWritten, handWrittenNoAudit);
const path = `/v1/posts/${pipeline.info.post.id}`;

const scenarios: { name: string; server: Server; path: string; headers: Record<string, string> }[] = [
  { name: 'bare Fastify route', server: bare, path, headers: {} },
  {
    name: 'hand-written equivalent (same work, no layers)',
    server: handWritten,
    path: `/v1/posts/${handWritten.info.post.id}`,
    headers: { authorization: `Bearer ${handWritten.info.token}` },
  },
  {
    name: 'hand-written equivalent without the audit row',
    server: handWrittenNoAudit,
    path: `/v1/posts/${handWrittenNoAudit.info.post.id}`,
    headers: { authorization: `Bearer ${handWrittenNoAudit.info.token}` },
  },
  { name: 'pipeline, JWT', server: pipeline, path, headers: { authorization: `Bearer ${pipeline.info.jwt}` } },
  { name: 'pipeline, opaque token', server: pipeline, path, headers: { authorization: `Bearer ${pipeline.info.opaque}` } },
  {
    name: 'pipeline, JWT, LOG_LEVEL=info',
    server: logging,
    path: `/v1/posts/${logging.info.post.id}`,
    headers: { authorization: `Bearer ${logging.info.jwt}` },
  },
];
const JWT_SCENARIO = scenarios.findIndex((scenario) => scenario.name === 'pipeline, JWT');
// Latency below saturation: the same servers at one fixed rate, half of what the pipeline sustained in that
// round, where queueing no longer dominates p99.
const paced = [scenarios[0]!, scenarios[1]!, scenarios[JWT_SCENARIO]!];
const rounds: Measurement[][] = [];
const pacedRounds: { rate: number; results: Measurement[] }[] = [];
const probes: CoreStalls[] = [];
/** The pipeline (JWT) against the hand-written server in each alternating round: req/s and CPU per request. */
const pairRounds: { requests: number; cpu: number; errors: number }[] = [];
/** The same two loaded at once in each round: req/s and CPU per request. */
const atOnceRounds: { requests: number; cpu: number; errors: number }[] = [];

try {
  for (let round = 0; round < ROUNDS; round++) {
    const results: Measurement[] = [];
    for (const scenario of scenarios) {
      results.push(await measure(scenario.name, scenario.server, scenario.path, scenario.headers, saturating, WARMUP));
    }
    rounds.push(results);
    const rate = Math.round(results[JWT_SCENARIO]!.requestsPerSecond / 2);
    // The core probed with every server stopped (see probeCoreStalls).
    const probe = await whileStopped(servers, () => probeCoreStalls(PROBE_SECONDS));
    if (probe) probes.push(probe);
    const pacedResults: Measurement[] = [];
    // The servers were saturated moments before: the warm-up at the rate is long enough for them to settle
    // (collect that phase's garbage, checkpoint its WAL backlog).
    for (const scenario of paced) {
      pacedResults.push(await measure(scenario.name, scenario.server, scenario.path, scenario.headers, steady(rate), PACED_WARMUP));
    }
    pacedRounds.push({ rate, results: pacedResults });
  }
  const [reference, jwtPipeline] = [scenarios[1]!, scenarios[JWT_SCENARIO]!];
  for (let round = 0; round < PAIR_ROUNDS; round++) {
    const measured = new Map<(typeof scenarios)[number], Measurement>();
    for (const scenario of round % 2 === 0 ? [jwtPipeline, reference] : [reference, jwtPipeline]) {
      measured.set(scenario, await measure(scenario.name, scenario.server, scenario.path, scenario.headers, saturating, 0, PAIR_SECONDS));
    }
    const [pipelineRun, referenceRun] = [measured.get(jwtPipeline)!, measured.get(reference)!];
    pairRounds.push({
      requests: pipelineRun.requestsPerSecond / referenceRun.requestsPerSecond,
      cpu: referenceRun.cpuMicrosPerRequest / pipelineRun.cpuMicrosPerRequest,
      errors: pipelineRun.non2xx + referenceRun.non2xx,
    });
  }
  for (let round = 0; round < AT_ONCE_ROUNDS; round++) {
    const [pipelineRun, referenceRun] = await atOnce([jwtPipeline, reference], round === 0 ? WARMUP : 0, AT_ONCE_SECONDS);
    atOnceRounds.push({
      requests: pipelineRun!.requests / referenceRun!.requests,
      cpu: referenceRun!.cpuMicrosPerRequest / pipelineRun!.cpuMicrosPerRequest,
      errors: pipelineRun!.errors + referenceRun!.errors,
    });
  }
} finally {
  await stop(logging);
  await stop(pipeline);
  await stop(handWritten);
  await stop(handWrittenNoAudit);
  await stop(bare);
}

console.log(`\n${describeMachine(CONNECTIONS, ROUNDS, DURATION)}\n`);
console.log('| scenario | req/s | p50 ms | p99 ms | server CPU µs/req | vs bare (req/s) | errors |');
console.log('|---|---|---|---|---|---|---|');
/** Medians over rounds of one scenario's measurements; errors are summed. */
function summarize(name: string, runs: Measurement[]) {
  return {
    name,
    requestsPerSecond: Math.round(median(runs.map((r) => r.requestsPerSecond))),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    cpu: Math.round(median(runs.map((r) => r.cpuMicrosPerRequest))),
    errors: runs.reduce((sum, r) => sum + r.non2xx, 0),
  };
}

const summary = scenarios.map((scenario, index) => ({
  ...summarize(scenario.name, rounds.map((results) => results[index]!)),
  ratio: median(rounds.map((results) => results[index]!.requestsPerSecond / results[0]!.requestsPerSecond)),
}));
for (const r of summary) {
  console.log(`| ${r.name} | ${r.requestsPerSecond} | ${r.p50} | ${r.p99} | ${r.cpu} | ${r.ratio.toFixed(2)}x | ${r.errors} |`);
}

const rate = Math.round(median(pacedRounds.map((r) => r.rate)));
console.log(`\nAt a steady rate, half the pipeline's saturated throughput (median ${rate} req/s), over up to ${CONNECTIONS} connections\n`);
console.log('| scenario | p50 ms | p99 ms | server CPU µs/req | errors |');
console.log('|---|---|---|---|---|');
const pacedSummary = paced.map((scenario, index) => summarize(scenario.name, pacedRounds.map((r) => r.results[index]!)));
for (const r of pacedSummary) console.log(`| ${r.name} | ${r.p50} | ${r.p99} | ${r.cpu} | ${r.errors} |`);
if (probes.length > 0) {
  const seconds = probes.reduce((sum, probe) => sum + probe.seconds, 0);
  const stalls = probes.reduce((sum, probe) => sum + probe.stalls, 0);
  const longest = Math.max(...probes.map((probe) => probe.longestMs));
  const lost = probes.reduce((sum, probe) => sum + probe.lostMs, 0);
  console.log(
    `\nThe servers' core with every server stopped (${seconds} s, a process that only reads the clock): held up ${stalls} times for more than ` +
      `${STALL_MS} ms (${(stalls / seconds).toFixed(1)} a second), the longest ${longest.toFixed(1)} ms, ${((lost / (seconds * 1000)) * 100).toFixed(2)} % of the time. ` +
      'A server measured on that core carries these stalls in its tail, whatever it does.',
  );
}

const generatorStalls = pacedRounds.flatMap((r) => r.results.map((result) => result.loadStalls)).filter((stalls) => stalls !== undefined);
if (generatorStalls.length > 0) {
  const count = generatorStalls.reduce((sum, stalls) => sum + stalls.count, 0);
  const longest = Math.max(...generatorStalls.map((stalls) => stalls.longestMs));
  console.log(
    `The load generator's own core at the steady rate (${generatorStalls.length * DURATION} s counted): its sending loop held up ${count} times ` +
      `for more than 1 ms, the longest ${longest.toFixed(1)} ms. Requests that fell due meanwhile were sent late, and their latency carries that wait.`,
  );
}

const jwt = summary.find((r) => r.name === 'pipeline, JWT')!;
const pacedJwt = pacedSummary.find((r) => r.name === 'pipeline, JWT')!;
const inTable = median(rounds.map((results) => results[JWT_SCENARIO]!.requestsPerSecond / results[1]!.requestsPerSecond));
const spread = (values: number[]) => `${median(values).toFixed(2)}x (rounds ${Math.min(...values).toFixed(2)}x–${Math.max(...values).toFixed(2)}x)`;
const againstWork =
  atOnceRounds.length > 0 ? median(atOnceRounds.map((pair) => pair.cpu)) : pairRounds.length > 0 ? median(pairRounds.map((pair) => pair.requests)) : inTable;
console.log(`\npipeline with a JWT against the hand-written equivalent, in the table's rounds: ${inTable.toFixed(2)}x (bare route: ${jwt.ratio.toFixed(2)}x)`);
if (pairRounds.length > 0) {
  console.log(
    `the two alone, ${pairRounds.length} alternating rounds of ${PAIR_SECONDS} s: requests/s ${spread(pairRounds.map((pair) => pair.requests))}, ` +
      `CPU per request ${spread(pairRounds.map((pair) => pair.cpu))}`,
  );
}
if (atOnceRounds.length > 0) {
  console.log(
    `the two at once, ${atOnceRounds.length} rounds of ${AT_ONCE_SECONDS} s: CPU per request ${spread(atOnceRounds.map((pair) => pair.cpu))}, ` +
      `requests/s ${spread(atOnceRounds.map((pair) => pair.requests))}`,
  );
}
const met = againstWork >= 0.85 && pacedJwt.p99 < 3;
const judgedBy = atOnceRounds.length > 0 ? 'CPU per request, the two at once' : pairRounds.length > 0 ? 'requests/s, alternating rounds' : "requests/s, the table's rounds";
console.log(
  `target (pipeline with a JWT >= 0.85x the hand-written equivalent's throughput, judged by ${judgedBy}; p99 < 3 ms at the steady rate): ` +
    `${met ? 'met' : 'not met'} (${againstWork.toFixed(2)}x, p99 ${pacedJwt.p99} ms)`,
);
const failed = [...summary, ...pacedSummary].filter((r) => r.errors > 0).map((r) => r.name);
if (pairRounds.some((pair) => pair.errors > 0)) failed.push('the alternating rounds');
if (atOnceRounds.some((pair) => pair.errors > 0)) failed.push('the rounds at once');
if (failed.length > 0) {
  console.error(`\nnon-2xx responses or errors in: ${failed.join(', ')}`);
  process.exitCode = 1;
}
