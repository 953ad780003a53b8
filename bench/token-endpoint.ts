/**
 * `npm run bench:token`: Portcullis's POST /oauth/token against oidc-provider configured equivalently
 * (servers/oidc-provider.ts), in one run: client credentials with a JWT access token (ES256), with an opaque
 * one, and refresh-token rotation. Both servers run side by side, each in its own process pinned to CPU 1;
 * autocannon (50 connections) runs here, pinned to CPU 0. oidc-provider keeps its state in its default
 * in-memory store; Portcullis commits each token's row (revocation) to SQLite — the rows of one event-loop
 * turn in one shared commit — and appends the audit event in batches.
 *
 * Every scenario is measured in BENCH_ROUNDS rounds (default 3) of BENCH_DURATION seconds (default 5) per
 * server, taken in turns in BENCH_SLICES slices (default 5, so one second each; token/turns.ts says why),
 * the servers' order alternating from round to round. The ratio is taken within a round and the table
 * shows medians over rounds. Reports tokens/s, p50/p99 latency, server CPU time per token and Portcullis / oidc-provider; a bare
 * Fastify route that answers with a fixed token (servers/bare-token.ts) runs in the first scenario's
 * slices as the floor: what HTTP and the framework alone cost per request here.
 *
 * BENCH_SCENARIO=refresh (any part of a scenario's name) measures the scenarios it names only, the floor
 * with them: a quicker look while working on one of them, not a run for the table in the README.
 */
import { describeMachine, median, pinLoadGenerator, startServer, stopServer, type Server } from './processes.js';
import { mintRefreshToken } from './token/authorization-code.js';
import { mintPortcullisRefreshToken, portcullisRefreshUnavailable } from './token/portcullis-refresh.js';
import { checkResponse, CLIENT_CREDENTIALS_BODY, SCENARIOS as ALL_SCENARIOS, TOKEN_PATH, type Scenario, type Side } from './token/scenarios.js';
import { CONNECTIONS } from './token/token-load.js';
import { measureInTurns, type Measurement } from './token/turns.js';
import { basicAuthorization, JWT_CLIENT, REDIRECT_URI, REFRESH_CLIENT, SCOPE } from './servers/token-clients.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const SCENARIOS = ALL_SCENARIOS.filter((scenario) => scenario.name.includes(process.env.BENCH_SCENARIO ?? ''));
if (SCENARIOS.length === 0) throw new Error(`BENCH_SCENARIO=${process.env.BENCH_SCENARIO} names no scenario`);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SLICES = Number(process.env.BENCH_SLICES ?? 5);
const WARMUP = 2;
const TARGET = 1.5;

pinLoadGenerator();

const portcullis = await startServer('bench/servers/token-endpoint.ts', { env: { LOG_LEVEL: 'warn' } });
const oidcProvider = await startServer('bench/servers/oidc-provider.ts');
const base = (server: Server) => `http://127.0.0.1:${server.info.port}`;
// The floor answers with a token Portcullis issued, so that its responses are the same size.
const sample = await fetch(base(portcullis) + TOKEN_PATH, {
  method: 'POST',
  headers: { authorization: basicAuthorization(JWT_CLIENT), 'content-type': 'application/x-www-form-urlencoded' },
  body: CLIENT_CREDENTIALS_BODY,
});
const bare = await startServer('bench/servers/bare-token.ts', { args: [((await sample.json()) as { access_token: string }).access_token] });
const sides: Side[] = [
  {
    name: 'Portcullis',
    server: portcullis,
    base: base(portcullis),
    mintRefreshToken: () => mintPortcullisRefreshToken(base(portcullis)),
    refreshUnavailable: () => portcullisRefreshUnavailable(base(portcullis)),
  },
  {
    name: 'oidc-provider',
    server: oidcProvider,
    base: base(oidcProvider),
    mintRefreshToken: () =>
      mintRefreshToken({
        base: base(oidcProvider),
        authorizePath: '/oauth/authorize',
        tokenPath: TOKEN_PATH,
        clientId: REFRESH_CLIENT,
        authorization: basicAuthorization(REFRESH_CLIENT),
        redirectUri: REDIRECT_URI,
        scope: `offline_access ${SCOPE}`,
      }),
    refreshUnavailable: async () => null,
  },
  {
    name: 'bare Fastify route (floor)',
    floor: true,
    server: bare,
    base: base(bare),
    mintRefreshToken: () => Promise.reject(new Error('not a token endpoint')),
    refreshUnavailable: async () => 'not a token endpoint',
  },
];

/** One round of a scenario: its servers measured in turns, in `order`. */
async function measureRound(scenario: Scenario, order: Side[]): Promise<Map<Side, Measurement>> {
  const contenders = order.map((side) => ({ pid: side.server.child.pid!, prepare: () => scenario.prepare(side) }));
  const measured = await measureInTurns(contenders, { warmupSeconds: WARMUP, seconds: DURATION, slices: SLICES });
  return new Map(order.map((side, index) => [side, measured[index]!]));
}

const unavailable = new Map<string, string>();
const rounds = new Map<string, Measurement[]>();
const key = (scenario: Scenario, side: Side) => `${scenario.name}\u0000${side.name}`;
try {
  for (const scenario of SCENARIOS) {
    for (const side of sides) {
      const reason = side.floor && scenario !== SCENARIOS[0] ? 'measured with the first scenario only' : await scenario.unavailable(side);
      if (reason) unavailable.set(key(scenario, side), reason);
      else await checkResponse(scenario, side);
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const scenario of SCENARIOS) {
      const order = (round % 2 === 0 ? sides : [...sides].reverse()).filter((side) => !unavailable.has(key(scenario, side)));
      for (const [side, measurement] of await measureRound(scenario, order)) {
        const runs = rounds.get(key(scenario, side)) ?? [];
        runs.push(measurement);
        rounds.set(key(scenario, side), runs);
      }
    }
  }
} finally {
  await stopServer(portcullis);
  await stopServer(oidcProvider);
  await stopServer(bare);
}

console.log(`\n${describeMachine(CONNECTIONS, ROUNDS, DURATION)}, in slices of ${DURATION / SLICES} s taken in turns\n`);
console.log('| scenario | server | tokens/s | p50 ms | p99 ms | server CPU µs/token | errors |');
console.log('|---|---|---|---|---|---|---|');
let errors = 0;
for (const scenario of SCENARIOS) {
  for (const side of sides) {
    const reason = unavailable.get(key(scenario, side));
    if (reason && side !== sides[0] && side !== sides[1]) continue;
    if (reason) {
      console.log(`| ${scenario.name} | ${side.name} | not available: ${reason} | | | | |`);
      continue;
    }
    const runs = rounds.get(key(scenario, side)) ?? [];
    const sum = runs.reduce((total, r) => total + r.errors, 0);
    errors += sum;
    const m = (pick: (r: Measurement) => number) => median(runs.map(pick));
    console.log(
      `| ${scenario.name} | ${side.name} | ${Math.round(m((r) => r.tokensPerSecond))} | ${m((r) => r.p50)} | ${m((r) => r.p99)} | ` +
        `${Math.round(m((r) => r.cpuMicrosPerToken))} | ${sum} |`,
    );
  }
}

console.log(`\nPortcullis / oidc-provider, median of the per-round ratios (target: at least ${TARGET}x tokens/s)\n`);
console.log('| scenario | tokens/s | CPU per token (oidc-provider / Portcullis) | target |');
console.log('|---|---|---|---|');
for (const scenario of SCENARIOS) {
  const ours = rounds.get(key(scenario, sides[0]!));
  const theirs = rounds.get(key(scenario, sides[1]!));
  if (!ours || !theirs) {
    const reason = unavailable.get(key(scenario, sides[0]!)) ?? unavailable.get(key(scenario, sides[1]!));
    console.log(`| ${scenario.name} | not available | | ${reason ?? ''} | |`);
    continue;
  }
  const ratios = (runs: Measurement[]) =>
    `${median(runs.map((r, i) => r.tokensPerSecond / theirs[i]!.tokensPerSecond)).toFixed(2)}x | ` +
    `${median(runs.map((r, i) => theirs[i]!.cpuMicrosPerToken / r.cpuMicrosPerToken)).toFixed(2)}x`;
  const throughput = median(ours.map((r, i) => r.tokensPerSecond / theirs[i]!.tokensPerSecond));
  console.log(`| ${scenario.name} | ${ratios(ours)} | ${throughput >= TARGET ? 'met' : 'not met'} |`);
}
if (errors > 0) {
  console.error(`\n${errors} non-2xx responses or errors`);
  process.exitCode = 1;
}
