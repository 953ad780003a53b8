/**
 * `npm run soak`: two server instances on one new PostgreSQL database and one Redis, as operators run them
 * behind a load balancer, under SOAK_WARMUP seconds (default 30) and then SOAK_DURATION seconds (default 60)
 * of 200 connections split between them:
 * REST reads and writes (POST, some with an Idempotency-Key sent again to the other instance, PATCH),
 * GraphQL queries and createPost, and client-credentials token requests whose tokens the load goes on with.
 * Afterwards every acknowledged write is read back, the instances are stopped with SIGTERM, the audit chain
 * is counted against the decisions the load's requests owed it and checked with `audit verify`, and the
 * instances' resident memory over the load is judged (memory.ts states the rule). Prints the figures and
 * exits 1 when a criterion fails; the run's logs are kept then. Not part of `npm test` or CI.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { cpuMillis } from './processes.js';
import { runCli } from './soak/cli.js';
import { countPosts, createDatabase, readAuditFigures } from './soak/database.js';
import { startInstance, stopInstance, type Instance } from './soak/instances.js';
import { MIX, readAllBack, runLoops } from './soak/load.js';
import { collectedMemory, inspectorUrl } from './soak/collected-memory.js';
import { judgeMemory, MemorySampler } from './soak/memory.js';
import { report } from './soak/report.js';
import { LOAD_SCOPES, requestToken, type LoadClient, type Loop, type Soak } from './soak/requests.js';
import { seedPosts } from './soak/seed.js';
import { Tally } from './soak/tally.js';
import { Target } from './soak/target.js';
import { Writes } from './soak/writes.js';

const DURATION = Number(process.env.SOAK_DURATION ?? 60);
// The same load before the measured DURATION: the processes' caches fill and V8 sizes its heap for the
// allocation rate; memory is compared from the warm-up's end on.
const WARMUP = Number(process.env.SOAK_WARMUP ?? 30);
/** The last reading of memory is taken this long before the load ends, so that it is taken under load too. */
const END_READING_LEAD_MS = 2000;
const CONNECTIONS = 200;
const LOAD_CLIENTS = 10;
const READ_BACK_CONCURRENCY = 50;
const REDIS_URL = process.env.SOAK_REDIS_URL ?? 'redis://127.0.0.1:6379';
const KEY_ENCRYPTION_SECRET = 'soak-key-encryption-secret-0123456789abcdef';

if (!Number.isFinite(DURATION) || DURATION < 3 || !Number.isFinite(WARMUP) || WARMUP < 0) {
  console.error('SOAK_DURATION must be a number of seconds, at least 3, and SOAK_WARMUP one of at least 0');
  process.exit(2);
}

async function checkRedis(): Promise<void> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new Error(`Redis does not answer at ${REDIS_URL}: ${String(error)}`);
  } finally {
    redis.disconnect();
  }
}

if (spawnSync(process.execPath, ['bin/build.js', '--if-stale'], { stdio: 'inherit' }).status !== 0) process.exit(1);
await checkRedis();

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-soak-'));
const database = await createDatabase();
const instances: Instance[] = [];
let failed: string[] = ['the soak did not finish'];
try {
  const env = {
    NODE_ENV: 'production',
    WORKERS: '1',
    DATABASE_URL: database.url,
    REDIS_URL,
    // The address clients know them by (a load balancer's): both issue and accept tokens for it.
    ISSUER: 'https://soak.invalid',
    KEY_ENCRYPTION_SECRET,
    OAUTH_PASSWORD_GRANT: 'enabled',
    // Limits far above the load, which comes from one address: it is never refused.
    RATE_LIMIT_MAX: '1000000',
    RATE_LIMIT_ANONYMOUS_MAX: '1000000',
    RATE_LIMIT_ADDRESS_MAX: '1000000',
    RATE_LIMIT_WINDOW: '1',
    MAX_CONNECTIONS_PER_ADDRESS: '0',
    // The load takes a new token every ~11 requests and each instance caches every one it verifies: with
    // the default 10,000 the cache fills for about two minutes, its entries growing the live heap by ~25
    // MiB until then (then flat). A tenth of it reaches its bound within the warm-up, so the measured load
    // runs with every cache full and evicting, as a long-running server does.
    TOKEN_CACHE_SIZE: '1000',
  };
  // The first creates the schema, the signing keys and the bootstrap admin; the second joins.
  instances.push(await startInstance('A', workDir, env));
  instances.push(await startInstance('B', workDir, env));
  const cliEnv = { DATABASE_URL: database.url, KEY_ENCRYPTION_SECRET };

  const clients: LoadClient[] = [];
  for (let i = 0; i < LOAD_CLIENTS; i++) {
    const scopes = LOAD_SCOPES.flatMap((scope) => ['--scope', scope]);
    const created = await runCli(['clients', 'create', '--name', `Soak ${i}`, '--type', 'confidential', '--grant', 'client_credentials', '--role', 'editor', ...scopes], cliEnv);
    clients.push({ clientId: String(created.clientId), clientSecret: String(created.clientSecret) });
  }
  const targets = instances.map((instance) => new Target(instance.name, instance.port, CONNECTIONS / instances.length));
  const seeds = await seedPosts(targets, cliEnv);
  const soak: Soak = { targets, tally: new Tally(), writes: new Writes(), seeds, random: Math.random };
  const loops: Loop[] = Array.from({ length: CONNECTIONS }, (_, index) => ({ index, client: clients[index % LOAD_CLIENTS]!, token: '', own: [], sequence: 0 }));
  await Promise.all(loops.map((loop) => requestToken(soak, loop, targets[loop.index % targets.length]!)));
  if (loops.some((loop) => loop.token === '')) throw new Error(`the load's clients got no tokens: ${soak.tally.examples.join('; ')}`);

  console.log(
    `${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, Node ${process.version}; ` +
      `${WARMUP} s warm-up, then ${DURATION} s measured; ${CONNECTIONS} connections (${CONNECTIONS / instances.length} per instance), ${LOAD_CLIENTS} clients, ` +
      `PostgreSQL database ${database.name}, Redis ${REDIS_URL}`,
  );
  console.log(`mix: ${MIX.map(({ name, share }) => `${name} ${share}%`).join(', ')}`);

  const before = soak.tally.total();
  const sampler = new MemorySampler(instances.map((instance) => ({ name: instance.name, pid: instance.child.pid! })));
  const cpuBefore = instances.map((instance) => cpuMillis(instance.child.pid!));
  // Memory after a full collection: before the load, after the warm-up, and just before the load ends.
  const inspectors = instances.map((instance) => inspectorUrl(instance.log));
  const readCollected = () => Promise.all(inspectors.map((url) => (url === null ? null : collectedMemory(url))));
  const collected = [await readCollected()];
  const pending: Promise<void>[] = [];
  const started = Date.now();
  sampler.start(1000);
  const timers = [
    setTimeout(() => {
      sampler.measure();
      pending.push(readCollected().then((reading) => void (collected[1] = reading)));
    }, WARMUP * 1000),
    setTimeout(() => pending.push(readCollected().then((reading) => void (collected[2] = reading))), (WARMUP + DURATION) * 1000 - END_READING_LEAD_MS),
  ];
  await runLoops(soak, loops, started + (WARMUP + DURATION) * 1000);
  for (const timer of timers) clearTimeout(timer);
  sampler.stop();
  await Promise.all(pending);
  const seconds = (Date.now() - started) / 1000;
  const cpuSeconds = Object.fromEntries(instances.map((instance, i) => [instance.name, (cpuMillis(instance.child.pid!) - cpuBefore[i]!) / 1000]));
  const loadRequests = soak.tally.total() - before;

  const readBack = await readAllBack(soak, loops.slice(0, READ_BACK_CONCURRENCY));
  for (const target of targets) target.close();
  const exitCodes: Record<string, number | null> = {};
  for (const instance of instances) exitCodes[instance.name] = await stopInstance(instance);

  failed = report({
    seconds,
    instances: instances.map((instance) => instance.name),
    tally: soak.tally,
    loadRequests,
    cpuSeconds,
    writes: soak.writes,
    readBack,
    seeds: seeds.length,
    postsStored: await countPosts(database.url),
    audit: await readAuditFigures(database.url, clients.map((client) => client.clientId)),
    verify: await runCli(['audit', 'verify'], cliEnv),
    memory: Object.fromEntries(
      instances.map((instance, i) => [instance.name, judgeMemory(sampler.samples.get(instance.name)!, sampler.warmupSamples, [0, 1, 2].map((at) => collected[at]?.[i] ?? null))]),
    ),
    samples: Object.fromEntries(sampler.samples),
    exitCodes,
  });
} catch (error) {
  console.error(error);
} finally {
  for (const instance of instances) await stopInstance(instance, 5000);
  await database.drop();
  if (failed.length === 0) fs.rmSync(workDir, { recursive: true, force: true });
  else {
    console.error(`\nsoak failed: ${failed.join('; ')}\nthe instances' logs are in ${workDir}`);
    process.exitCode = 1;
  }
}
