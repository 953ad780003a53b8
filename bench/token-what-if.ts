/**
 * `npm run bench:token-what-if`: what each proposed change to the token endpoint saves under load. The
 * hand-written endpoint of servers/token-hand-written.ts runs with all the changes, with each one reverted
 * on its own, and with all reverted (today's work without the layers), beside the real endpoint and
 * oidc-provider, on client credentials with a JWT — measured in turns like `bench:token`. A change's saving
 * is the CPU per token its reversal adds, taken within a round; the table shows medians.
 */
import { describeMachine, median, pinLoadGenerator, startServer, stopServer, type Server } from './processes.js';
import { CONNECTIONS, formLoad } from './token/token-load.js';
import { measureInTurns, type Measurement } from './token/turns.js';
import { basicAuthorization, JWT_CLIENT, SCOPE } from './servers/token-clients.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SLICES = Number(process.env.BENCH_SLICES ?? 5);
const WARMUP = 2;

pinLoadGenerator();

const REVERSALS = ['--sign-with-jose', '--client-from-database', '--row-per-request'];
const contenders: { name: string; script: string; args: string[] }[] = [
  { name: 'by hand, all three changes', script: 'bench/servers/token-hand-written.ts', args: [] },
  { name: 'by hand, signing with jose again', script: 'bench/servers/token-hand-written.ts', args: ['--sign-with-jose'] },
  { name: 'by hand, the client read per request again', script: 'bench/servers/token-hand-written.ts', args: ['--client-from-database'] },
  { name: 'by hand, one Kysely commit per row again', script: 'bench/servers/token-hand-written.ts', args: ['--row-per-request'] },
  { name: 'by hand, all three changes and no row for a JWT', script: 'bench/servers/token-hand-written.ts', args: ['--no-jwt-row'] },
  { name: "by hand, none of the changes (today's work)", script: 'bench/servers/token-hand-written.ts', args: REVERSALS },
  { name: 'Portcullis today', script: 'bench/servers/token-endpoint.ts', args: [] },
  { name: 'oidc-provider', script: 'bench/servers/oidc-provider.ts', args: [] },
];

const servers: Server[] = [];
const rounds: Measurement[][] = [];
try {
  for (const { script, args } of contenders) servers.push(await startServer(script, { args, env: { LOG_LEVEL: 'warn' } }));
  const body = `grant_type=client_credentials&scope=${encodeURIComponent(SCOPE)}`;
  const loads = servers.map((server) => ({
    pid: server.child.pid!,
    prepare: async () => formLoad(`http://127.0.0.1:${server.info.port}/oauth/token`, basicAuthorization(JWT_CLIENT), body),
  }));
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order from round to round, as the slices within a round do.
    const order = round % 2 === 0 ? loads : [...loads].reverse();
    const measured = await measureInTurns(order, { warmupSeconds: WARMUP, seconds: DURATION, slices: SLICES });
    rounds.push(loads.map((load) => measured[order.indexOf(load)]!));
  }
} finally {
  for (const server of servers) await stopServer(server);
}

const base = 0;
const oidc = contenders.length - 1;
console.log(`\nclient credentials, JWT. ${describeMachine(CONNECTIONS, ROUNDS, DURATION)}, in slices of ${DURATION / SLICES} s taken in turns\n`);
console.log('| server | tokens/s | server CPU µs/token | µs/token more than all three changes | vs oidc-provider (tokens/s) | errors |');
console.log('|---|---|---|---|---|---|');
let errors = 0;
contenders.forEach(({ name }, index) => {
  const runs = rounds.map((round) => round[index]!);
  const sum = runs.reduce((total, r) => total + r.errors, 0);
  errors += sum;
  const more = median(rounds.map((round) => round[index]!.cpuMicrosPerToken - round[base]!.cpuMicrosPerToken));
  const ratio = median(rounds.map((round) => round[index]!.tokensPerSecond / round[oidc]!.tokensPerSecond));
  console.log(
    `| ${name} | ${median(runs.map((r) => r.tokensPerSecond))} | ${median(runs.map((r) => r.cpuMicrosPerToken))} | ` +
      `${index === base ? '' : Math.round(more)} | ${ratio.toFixed(2)}x | ${sum} |`,
  );
});
if (errors > 0) {
  console.error(`\n${errors} non-2xx responses or errors`);
  process.exitCode = 1;
}
