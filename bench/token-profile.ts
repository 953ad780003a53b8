/**
 * `npm run bench:token-profile [jwt|opaque|refresh]`: where a token's CPU time goes inside the
 * Portcullis server under the load of `bench:token` — V8's sampling profiler over the measured window only
 * (token/profile-on-signal.ts), each sample charged to a stage of the token endpoint or, when no stage is
 * on its stack, to a component (token/cpu-profile.ts). Microseconds per token are the main thread's
 * samples divided by the tokens issued; the process's CPU time from /proc also counts its other threads
 * (WebCrypto's signing jobs, the WAL checkpoint worker, V8's own threads) and is printed beside it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { cpuMillis, pinLoadGenerator, startServer, stopServer } from './processes.js';
import { chargeSamples, type CallFrame, type CpuProfile, type Rule } from './token/cpu-profile.js';
import { CONNECTIONS, formLoad, refreshLoad, type Load } from './token/token-load.js';
import { mintPortcullisRefreshToken } from './token/portcullis-refresh.js';
import { basicAuthorization, JWT_CLIENT, OPAQUE_CLIENT, REFRESH_CLIENT, SCOPE } from './servers/token-clients.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const WARMUP = 3;
const SCENARIO_NAMES = { jwt: 'client credentials, JWT', opaque: 'client credentials, opaque', refresh: 'refresh-token rotation, JWT' } as const;
const scenario: keyof typeof SCENARIO_NAMES = process.argv[2] === 'opaque' || process.argv[2] === 'refresh' ? process.argv[2] : 'jwt';

pinLoadGenerator();

const rule = (name: string, test: (frame: CallFrame) => boolean): Rule => ({ name, matches: test });
const inFile = (part: string) => (frame: CallFrame) => frame.url.includes(part);
const named =
  (names: string[], part = '') =>
  (frame: CallFrame) =>
    names.includes(frame.functionName) && frame.url.includes(part);

/** Innermost first wins: a digest under authentication is charged to the digest. */
const STAGES: Rule[] = [
  rule('SHA-256 of the secret (and of an opaque token)', inFile('src/oauth/secrets')),
  rule('client lookup: held registrations, or a Kysely select up to its first await', (f) => named(['findClientByClientId', 'toClientRecord'], 'src/storage/clients')(f) || f.url.includes('src/oauth/registered-clients')),
  rule('client authentication: Basic parsing, checks', inFile('src/oauth/client-auth')),
  rule('scope selection', inFile('src/oauth/grants/client-credentials')),
  rule('ES256 signing (node:crypto), up to the thread pool', (f) => f.functionName === 'signJwtAccessToken' || f.functionName === 'encodedHeader'),
  rule('token rows: the turn\'s shared commit, outside the statements', inFile('src/storage/turn-batch')),
  rule('refresh: the token read, checks and claim', inFile('src/oauth/grants/refresh-token')),
  rule('user grant: its transaction, locks and rows', (f) => f.url.includes('src/oauth/grants/grant-commit') || f.url.includes('src/storage/row-locks') || f.url.includes('src/storage/write-transaction') || f.url.includes('src/storage/refresh-tokens')),
  rule('user grant: tokens signed, refresh token made', inFile('src/oauth/tokens/user-tokens')),
  rule('issue: id, claims, timestamps, key lookup', (f) => f.url.includes('src/oauth/tokens/') || f.url.includes('src/storage/ids') || f.url.includes('src/oauth/keys/')),
  rule('audit: record the decision', inFile('src/audit/audit-log')),
  rule('audit: batched append (hash chain, SQLite)', (f) => f.url.includes('src/audit/append-events') || f.url.includes('src/audit/chain')),
  rule('form parsing (UTF-8, URLSearchParams, params)', (f) => named(['parseForm'], 'src/oauth/routes')(f) || f.url.includes('src/http/body-encoding') || f.functionName === 'readFormParams'),
  rule('rate limit (per address)', (f) => f.url.includes('src/limits/') || f.url.includes('rate-limiter-flexible')),
  rule('token endpoint handler', inFile('src/oauth/endpoints/token')),
  rule('response: headers, JSON, write (Fastify reply)', (f) => f.url.includes('fastify/lib/reply') || f.functionName === 'stringify'),
  rule('app hooks: common headers, Host check', inFile('src/app.ts')),
];

/** For samples with no stage on their stack: the leaf's component. */
const COMPONENTS: Rule[] = [
  rule('Kysely after an await (both queries: compile, driver queue, statement cache)', (f) => f.url.includes('node_modules/kysely') || f.url.includes('src/storage/sqlite-statement-cache')),
  rule('SQLite statements (both queries, better-sqlite3)', (f) => f.url.includes('better-sqlite3') || (f.url === '' && ['run', 'get', 'all', 'iterate'].includes(f.functionName))),
  rule('Fastify: routing, hooks, body reading, request logger', (f) => /node_modules\/(fastify|find-my-way|avvio|@fastify|pino)/.test(f.url)),
  rule('Node HTTP, sockets, streams', (f) => /^node:(_http|net|stream|internal\/(http|streams|stream_base|timers|net))/.test(f.url) || ['writev', 'writeUtf8String', 'writeLatin1String', 'onStreamRead'].includes(f.functionName)),
  rule('promises, nextTick, event emitters', (f) => /^node:(events|async_hooks|internal\/process\/)/.test(f.url) || (f.url === '' && ['runMicrotasks', '(anonymous)'].includes(f.functionName))),
  rule('garbage collection', (f) => f.functionName === '(garbage collector)'),
  rule('V8 and native, unattributed', (f) => f.functionName === '(program)'),
];

const profileFile = path.join(os.tmpdir(), `portcullis-token-${process.pid}.cpuprofile`);
const server = await startServer('bench/servers/token-endpoint.ts', {
  env: { LOG_LEVEL: 'warn', BENCH_CPU_PROFILE: profileFile },
  nodeOptions: ['--import', './bench/token/profile-on-signal.ts'],
});
const pid = server.child.pid!;
const base = `http://127.0.0.1:${server.info.port}`;
/** A refresh load spends its chains: each window gets chains of its own, minted outside the measurement. */
async function prepareLoad(): Promise<Load> {
  if (scenario !== 'refresh') {
    const client = scenario === 'jwt' ? JWT_CLIENT : OPAQUE_CLIENT;
    return formLoad(`${base}/oauth/token`, basicAuthorization(client), `grant_type=client_credentials&scope=${encodeURIComponent(SCOPE)}`);
  }
  const chains: string[] = [];
  for (let i = 0; i < CONNECTIONS; i++) chains.push(await mintPortcullisRefreshToken(base));
  return refreshLoad(`${base}/oauth/token`, basicAuthorization(REFRESH_CLIENT), chains);
}
let profile: CpuProfile;
let tokens: number;
let cpuMicros: number;
try {
  await (await prepareLoad())(WARMUP);
  const load = await prepareLoad();
  process.kill(pid, 'SIGUSR2');
  const cpuBefore = cpuMillis(pid);
  const result = await load(DURATION);
  cpuMicros = (cpuMillis(pid) - cpuBefore) * 1000;
  tokens = result.tokens;
  process.kill(pid, 'SIGUSR2');
  for (let waited = 0; !fs.existsSync(profileFile); waited += 100) {
    if (waited > 30_000) throw new Error('the server wrote no profile');
    await sleep(100);
  }
  profile = JSON.parse(fs.readFileSync(profileFile, 'utf8')) as CpuProfile;
} finally {
  await stopServer(server);
  // --keep leaves the profile for a viewer (Chrome DevTools, speedscope).
  if (process.argv.includes('--keep')) console.log(`profile: ${profileFile}`);
  else fs.rmSync(profileFile, { force: true });
}

const { charged, busyMicros, unnamed } = chargeSamples(profile, STAGES, COMPONENTS);
const perToken = (micros: number) => (micros / tokens).toFixed(1);
console.log(`\n${SCENARIO_NAMES[scenario]}: ${tokens} tokens in ${DURATION} s (${Math.round(tokens / DURATION)}/s, profiler on)`);
console.log(`process CPU (all threads, /proc): ${perToken(cpuMicros)} µs/token; main thread busy (profile): ${perToken(busyMicros)} µs/token\n`);
console.log('| where | µs/token | share of main thread |');
console.log('|---|---|---|');
for (const { name, micros } of charged) console.log(`| ${name} | ${perToken(micros)} | ${((micros / busyMicros) * 100).toFixed(1)} % |`);
if (process.argv.includes('--leaves')) {
  console.log('\n"other", by leaf function:');
  for (const { name, micros } of unnamed.slice(0, 20)) console.log(`${perToken(micros).padStart(7)} µs/token  ${name}`);
}
