/**
 * `npm run bench:graphql`: GraphQL through the full pipeline against (a) a hand-written Mercurius server
 * doing the same work (token check, database reads, audit rows; servers/graphql-hand-written.ts) and (b)
 * bare Mercurius with its JIT resolving from memory (servers/graphql-bare.ts), in one run: each server in its
 * own process on CPU 1, autocannon (50 connections) here on CPU 0. Two queries: one post with its author,
 * and a page of 20 posts with their authors. BENCH_ROUNDS rounds (default 3) of BENCH_DURATION seconds
 * (default 5) per scenario; ratios are taken within a round and the medians shown.
 * Target: the pipeline at least 0.8x the hand-written server on both queries.
 */
import autocannon from 'autocannon';
import { cpuMillis, describeMachine, median, pinLoadGenerator, startServer, stopServer, type Server } from './processes.js';
import { LIST_QUERY, POST_QUERY } from './servers/graphql-data.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WARMUP = 2;
const CONNECTIONS = 50;

pinLoadGenerator();

interface Measurement {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  cpuMicros: number;
  errors: number;
}

async function load(server: Server, body: string, seconds: number) {
  return autocannon({
    url: `http://127.0.0.1:${server.info.port}/graphql`,
    method: 'POST',
    connections: CONNECTIONS,
    duration: seconds,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.info.token}` },
    body,
  });
}

async function measure(server: Server, query: string): Promise<Measurement> {
  const body = JSON.stringify({ query, variables: query === POST_QUERY ? { id: server.info.postId } : undefined });
  // One request first: a server that answers it with errors would be measured answering errors.
  const check = await fetch(`http://127.0.0.1:${server.info.port}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.info.token}` },
    body,
  });
  const answer = (await check.json()) as { errors?: unknown };
  if (check.status !== 200 || answer.errors) throw new Error(`${check.status} ${JSON.stringify(answer)}`);
  await load(server, body, WARMUP);
  const before = cpuMillis(server.child.pid!);
  const result = await load(server, body, DURATION);
  const after = cpuMillis(server.child.pid!);
  return {
    requestsPerSecond: Math.round(result.requests.total / DURATION),
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuMicros: Math.round(((after - before) * 1000) / Math.max(1, result.requests.total)),
    errors: result.non2xx + result.errors + result.timeouts,
  };
}

const servers = {
  bare: await startServer('bench/servers/graphql-bare.ts'),
  handWritten: await startServer('bench/servers/graphql-hand-written.ts'),
  pipeline: await startServer('bench/servers/graphql-pipeline.ts'),
};
const NAMES = { bare: 'bare Mercurius, JIT, from memory', handWritten: 'hand-written Mercurius (same work)', pipeline: 'Portcullis pipeline' } as const;
const QUERIES = { 'post(id) with author': POST_QUERY, '20 posts with authors': LIST_QUERY } as const;
type ServerName = keyof typeof servers;

const rounds: Record<string, Record<ServerName, Measurement>>[] = [];
try {
  for (let round = 0; round < ROUNDS; round++) {
    const results: Record<string, Record<ServerName, Measurement>> = {};
    for (const [label, query] of Object.entries(QUERIES)) {
      const byServer = {} as Record<ServerName, Measurement>;
      for (const name of Object.keys(servers) as ServerName[]) byServer[name] = await measure(servers[name], query);
      results[label] = byServer;
    }
    rounds.push(results);
  }
} finally {
  for (const server of Object.values(servers)) await stopServer(server);
}

console.log(`\n${describeMachine(CONNECTIONS, ROUNDS, DURATION)}\n`);
console.log('| query | server | req/s | p50 ms | p99 ms | server CPU µs/req | errors |');
console.log('|---|---|---|---|---|---|---|');
for (const label of Object.keys(QUERIES)) {
  for (const name of Object.keys(servers) as ServerName[]) {
    const runs = rounds.map((round) => round[label]![name]);
    console.log(
      `| ${label} | ${NAMES[name]} | ${Math.round(median(runs.map((r) => r.requestsPerSecond)))} | ${median(runs.map((r) => r.p50))} | ${median(runs.map((r) => r.p99))} | ${Math.round(median(runs.map((r) => r.cpuMicros)))} | ${runs.reduce((sum, r) => sum + r.errors, 0)} |`,
    );
  }
}
console.log('\nPortcullis pipeline against each reference, median of the per-round ratios of req/s (target: >= 0.8x the hand-written server)\n');
console.log('| query | vs hand-written Mercurius | vs bare Mercurius (JIT, memory) | target |');
console.log('|---|---|---|---|');
let failed = false;
for (const label of Object.keys(QUERIES)) {
  const ratio = (reference: ServerName) => median(rounds.map((round) => round[label]!.pipeline.requestsPerSecond / round[label]![reference].requestsPerSecond));
  const handWritten = ratio('handWritten');
  console.log(`| ${label} | ${handWritten.toFixed(2)}x | ${ratio('bare').toFixed(2)}x | ${handWritten >= 0.8 ? 'met' : 'not met'} |`);
  if (rounds.some((round) => Object.values(round[label]!).some((m) => m.errors > 0))) failed = true;
}
if (failed) {
  console.error('\nnon-2xx responses or errors in a scenario');
  process.exitCode = 1;
}
