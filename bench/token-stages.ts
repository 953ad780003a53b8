/**
 * `npm run bench:token-stages`: each stage of a client-credentials token at Portcullis, timed on its own
 * in one process (pinned to CPU 0) against the real app of servers/token-app.ts — the same functions the
 * token endpoint calls, on the same SQLite file — then the endpoint's former ways beside its present ones
 * (jose or node:crypto, a row per commit or rows sharing one, the client read or held), timed the same way. What the whole request costs is `bench:token`'s server CPU per token.
 *
 * Each figure is the median of BENCH_BATCHES (default 7) batches of sequential calls on an otherwise idle
 * event loop: the process's CPU time per call (what decides tokens/s on a saturated core, whichever thread
 * spends it) and the elapsed time (which adds waits: a thread-pool hop, and on a shared machine whatever
 * else ran on the core). Garbage collection falls where it happens to.
 */
import { SignJWT } from 'jose';
import { KeyObject, randomUUID, sign as signWithNode } from 'node:crypto';
import { foreignCharset, mediaTypeParameters, UTF8 } from '../src/http/body-encoding.js';
import { RateLimiter, rateLimitHeaders } from '../src/limits/rate-limit.js';
import { authenticateClient } from '../src/oauth/client-auth.js';
import { readFormParams } from '../src/oauth/endpoints/token.js';
import { grantClientCredentials } from '../src/oauth/grants/client-credentials.js';
import { digestSecret, secretMatches } from '../src/oauth/secrets.js';
import { insertAccessToken } from '../src/oauth/tokens/access-token-records.js';
import { signJwtAccessToken } from '../src/oauth/tokens/jwt-access-token.js';
import { findClientByClientId, toClientRecord, type ClientRecord } from '../src/storage/clients.js';
import { newId } from '../src/storage/ids.js';
import { median, pinLoadGenerator } from './processes.js';
import { basicAuthorization, BENCH_SECRET, JWT_CLIENT, SCOPE } from './servers/token-clients.js';
import { buildTokenBenchApp } from './servers/token-app.js';

const BATCHES = Number(process.env.BENCH_BATCHES ?? 7);
const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 1000);

pinLoadGenerator();

interface Timing {
  /** Process CPU time (user + system, every thread: WebCrypto's jobs and SQLite's checkpoint worker too). */
  cpu: number;
  /** Elapsed time, which a busy shared machine inflates by whatever else ran on this core meanwhile. */
  wall: number;
}

/** Microseconds per call: the median over batches of `iterations` calls made one after another. */
async function time(run: () => unknown, iterations = ITERATIONS): Promise<Timing> {
  const cpu: number[] = [];
  const wall: number[] = [];
  for (let batch = 0; batch <= BATCHES; batch++) {
    const cpuStart = process.cpuUsage();
    const start = performance.now();
    for (let i = 0; i < iterations; i++) {
      const result = run() as { then?: unknown } | undefined;
      // inject() answers with a thenable that is not a Promise.
      if (typeof result?.then === 'function') await result;
    }
    const elapsed = performance.now() - start;
    const used = process.cpuUsage(cpuStart);
    // The first batch warms the code up and is not counted.
    if (batch === 0) continue;
    wall.push((elapsed * 1000) / iterations);
    cpu.push((used.user + used.system) / iterations);
  }
  return { cpu: median(cpu), wall: median(wall) };
}

const bench = await buildTokenBenchApp();
const { app, config } = bench;
const db = app.db.kysely;
const sqlite = app.db.sqlite!;
const limiter = new RateLimiter(config.rateLimit);
const authorization = basicAuthorization(JWT_CLIENT);
const contentType = 'application/x-www-form-urlencoded';
const form = Buffer.from(`grant_type=client_credentials&scope=${encodeURIComponent(SCOPE)}`);
const params = readFormParams(new URLSearchParams(UTF8.decode(form)));
const stored = (await findClientByClientId(db, JWT_CLIENT))!;
const { client } = await authenticateClient((id) => findClientByClientId(db, id), { authorization, params });
const key = await app.keys.signingKey();
const claims = () => {
  const iat = Math.floor(Date.now() / 1000);
  return { iss: config.issuer, aud: config.issuer, sub: JWT_CLIENT, client_id: JWT_CLIENT, jti: newId(), scope: SCOPE, iat, exp: iat + 600 };
};
const row = (jti: string) => ({
  jti,
  tokenHash: null,
  format: 'jwt',
  clientId: client.clientId,
  clientRegistrationId: client.id,
  subject: client.clientId,
  subjectType: 'client',
  scopes: SCOPE,
  grantType: 'client_credentials',
  issuedAt: new Date().toISOString(),
  expiresAt: new Date(Date.now() + 600_000).toISOString(),
  revokedAt: null,
  grantId: null,
});
const issueInput = (format: 'jwt' | 'opaque') => ({
  client: { ...client, accessTokenFormat: format },
  subject: client.clientId,
  subjectType: 'client' as const,
  scopes: SCOPE.split(' '),
  grantType: 'client_credentials',
});
const response = { access_token: await signJwtAccessToken(claims(), key), token_type: 'Bearer', expires_in: 600, scope: SCOPE };

/** What the OAuth scope's form parser does (src/oauth/routes.ts, not exported), then readFormParams. */
function parseForm(body: Buffer): Readonly<Record<string, string>> {
  if (foreignCharset(mediaTypeParameters(contentType)) !== null) throw new Error('charset');
  const parsed = new URLSearchParams(UTF8.decode(body));
  for (const [name, value] of parsed) if (name.includes('\uFFFD') || value.includes('\uFFFD')) throw new Error('not UTF-8');
  return readFormParams(parsed);
}

const stages: [string, string, () => unknown][] = [
  ['rate limit (per address)', 'limiter.oauth.consume + rateLimitHeaders', async () => rateLimitHeaders(await limiter.oauth.consume('127.0.0.1'))],
  ['form parsing', 'parseForm (routes.ts) + readFormParams', () => parseForm(form)],
  ['client authentication, whole', 'authenticateClient', () => authenticateClient((id) => findClientByClientId(db, id), { authorization, params })],
  ['  of which: client lookup', 'findClientByClientId (Kysely select on SQLite)', () => findClientByClientId(db, JWT_CLIENT)],
  ['  of which: SHA-256 of the secret, constant-time compare', 'secretMatches', () => secretMatches(BENCH_SECRET, stored.secretHash!)],
  ['scope selection', 'grantClientCredentials', () => grantClientCredentials(client, params)],
  ['issue a JWT, whole', 'TokenService.issueAccessToken (jwt)', () => app.tokens.issueAccessToken(issueInput('jwt'))],
  ['  of which: signing key', 'KeyStore.signingKey', () => app.keys.signingKey()],
  ['  of which: ES256 signature (node:crypto, thread pool)', 'signJwtAccessToken', () => signJwtAccessToken(claims(), key)],
  ['issue an opaque token, whole', 'TokenService.issueAccessToken (opaque)', () => app.tokens.issueAccessToken(issueInput('opaque'))],
  ['audit record, with its share of the batched append', 'AuditLog.record + flush', auditRecord],
  ['JSON serialisation of the response', 'JSON.stringify', () => JSON.stringify(response)],
];

let audited = 0;
function auditRecord(): Promise<void> | undefined {
  app.audit.record({ requestId: randomUUID(), interface: 'oauth', operation: 'token', sourceAddress: '127.0.0.1', subject: JWT_CLIENT, clientId: JWT_CLIENT, resourceType: 'token', resourceId: newId(), decision: 'allow', reason: 'granted' });
  // The log flushes itself every 200 events; the last batch of a timing run is flushed here, and counted.
  return ++audited % ITERATIONS === 0 ? app.audit.flush() : undefined;
}

// The alternatives: what the endpoint did before (jose, the client read per request, a row per commit) beside what it does now.
const nodeKey = KeyObject.from(key.privateKey);
const header = Buffer.from(JSON.stringify({ alg: 'ES256', typ: 'at+jwt', kid: key.kid })).toString('base64url');
const signNode = () => {
  const input = `${header}.${Buffer.from(JSON.stringify(claims())).toString('base64url')}`;
  return `${input}.${signWithNode('sha256', Buffer.from(input), { key: nodeKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
};
const signJose = () => {
  const { client_id, scope, iss, aud, sub, jti, iat, exp } = claims();
  return new SignJWT({ client_id, scope }).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: key.kid })
    .setIssuer(iss).setAudience(aud).setSubject(sub).setJti(jti).setIssuedAt(iat).setExpirationTime(exp).sign(key.privateKey);
};
const signNodeAsync = () =>
  new Promise<string>((resolve, reject) => {
    const input = `${header}.${Buffer.from(JSON.stringify(claims())).toString('base64url')}`;
    signWithNode('sha256', Buffer.from(input), { key: nodeKey, dsaEncoding: 'ieee-p1363' }, (error, signature) =>
      error ? reject(error) : resolve(`${input}.${signature.toString('base64url')}`),
    );
  });
const selectClient = sqlite.prepare('select * from clients where client_id = ?');
const insertRow = sqlite.prepare(
  `insert into access_tokens (jti, token_hash, format, client_id, client_registration_id, subject, subject_type, scopes, grant_type, issued_at, expires_at, revoked_at, grant_id)
   values (@jti, @tokenHash, @format, @clientId, @clientRegistrationId, @subject, @subjectType, @scopes, @grantType, @issuedAt, @expiresAt, @revokedAt, @grantId)`,
);
const cachedClients = new Map<string, ClientRecord>([[JWT_CLIENT, client]]);
/** Rows committed together, as a group commit would when this many requests wait in one turn. */
const GROUP = 50;
const insertGroup = () => {
  const rows = Array.from({ length: GROUP }, () => row(newId()));
  sqlite.immediateTransaction(() => {
    for (const r of rows) insertRow.run(r);
  });
};
const camel = (record: Record<string, unknown>) => Object.fromEntries(Object.entries(record).map(([k, v]) => [k.replace(/_(.)/g, (_, c: string) => c.toUpperCase()), v]));
/** Signatures in flight at once, as under load (50 connections): WebCrypto and the callback run jobs on the thread pool. */
const IN_FLIGHT = 50;
const concurrently = (sign: () => Promise<unknown>) => () => Promise.all(Array.from({ length: IN_FLIGHT }, sign));
const alternatives: [string, () => unknown, number?][] = [
  [`ES256 signature, jose (WebCrypto), ${IN_FLIGHT} in flight (per signature)`, concurrently(signJose), ITERATIONS / IN_FLIGHT],
  ['ES256 signature with node:crypto, synchronous', signNode],
  ['ES256 signature with node:crypto, callback (thread pool; what jose 5 does in oidc-provider)', signNodeAsync],
  [`ES256 signature with node:crypto, callback, ${IN_FLIGHT} in flight (per signature)`, concurrently(signNodeAsync), ITERATIONS / IN_FLIGHT],
  ['client lookup, prepared statement', () => toClientRecord(camel(selectClient.get(JWT_CLIENT) as Record<string, unknown>) as never)],
  ['client lookup, cached in memory (invalidation feed evicts)', () => cachedClients.get(JWT_CLIENT)],
  ['SHA-256 of the secret only (digestSecret)', () => digestSecret(BENCH_SECRET)],
  ['access_tokens row, Kysely insert, own commit', () => insertAccessToken(db, row(newId()))],
  ['access_tokens row, prepared statement, own commit', () => insertRow.run(row(newId()))],
  [`access_tokens row, prepared statement, ${GROUP} rows per commit (per row)`, insertGroup, ITERATIONS / GROUP],
];

const results: { name: string; what: string; timing: Timing }[] = [];
try {
  for (const [name, what, run] of stages) results.push({ name, what, timing: await time(run) });
  for (const [name, run, iterations] of alternatives) {
    const timing = await time(run, iterations);
    const rows = name.includes('per row') ? GROUP : name.includes('per signature') ? IN_FLIGHT : 1;
    results.push({ name, what: 'alternative', timing: { cpu: timing.cpu / rows, wall: timing.wall / rows } });
  }
} finally {
  await bench.close();
}

console.log(`\nmedian of ${BATCHES} batches of ${ITERATIONS} sequential calls, Node ${process.version}\n`);
const cells = ({ cpu, wall }: Timing) => `${cpu.toFixed(1)} | ${wall.toFixed(1)}`;
console.log('| stage | function | CPU µs | elapsed µs |');
console.log('|---|---|---|---|');
for (const r of results.filter((r) => r.what !== 'alternative')) console.log(`| ${r.name} | ${r.what} | ${cells(r.timing)} |`);
console.log('\n| alternative | CPU µs | elapsed µs |');
console.log('|---|---|---|');
for (const r of results.filter((r) => r.what === 'alternative')) console.log(`| ${r.name} | ${cells(r.timing)} |`);
