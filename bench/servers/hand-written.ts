/**
 * Reference point: the work the pipeline does for GET /v1/posts/{postId}, written by hand with no layers —
 * one hook that checks the request has one Host field and reads its `traceparent`, looks the token up in a
 * map, checks that its user is still active and its client still the registration (and revocation count)
 * it was issued under, as cached for 5 s, checks its scope and the role's permission, negotiates the media
 * type and counts the client's and the user's rate-limit budgets (telling the tighter); a handler that checks the path, query and
 * If-None-Match against what the contract allows, reads the post with a prepared SQLite statement (its row
 * made an object as the pipeline makes it, src/storage/row-reader.ts), checks
 * the caller may read it, and answers with the same serialiser, sha256 ETag and headers (a 304 to a
 * matching If-None-Match); and one hook that counts the request and its latency and queues its
 * hash-chained audit event, appended in batches of 50 (or after 250 ms), as the pipeline's audit log does.
 * The distance between this and the bare route is the cost of the work itself; the distance between the
 * pipeline and this is what the pipeline's structure costs.
 *
 * `--token-length=N`: the bearer token's length (the benchmark gives it the length of the pipeline's JWT, so
 * that both parse and look up the same number of bytes). `--no-audit-rows` skips only the audit append, to
 * show what the durable audit row alone costs.
 */
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import fastJsonStringify from 'fast-json-stringify';
import { hash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { routes } from '../../generated/routes.js';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import { openDb } from '../../src/storage/dialect.js';
import { isoTime, newId } from '../../src/storage/ids.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { rowReader } from '../../src/storage/row-reader.js';
import { insertUser } from '../../src/storage/users.js';
import { appendAudit, auditAppended } from './reference-audit.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-bench-'));
const db = await openDb({ databaseUrl: null, dataDir, backgroundCheckpoints: true });
await migrateToLatest(db);
const sqlite = db.sqlite!;
const userId = newId();
const now = isoTime(Date.now());
await insertUser(db.kysely, { id: userId, email: 'bench@example.com', name: 'Bench', role: 'member', active: true, passwordHash: 'unused' }, now);
const post = { id: newId(), authorId: userId, title: 'Benchmark post', body: 'A post read over and over.', status: 'published', createdAt: now, updatedAt: now };
await db.kysely.insertInto('posts').values(post).execute();

// Read as the pipeline reads a resource: arrays of values made objects by a compiled constructor.
const selectPost = rowReader(
  sqlite,
  'select id, author_id as "authorId", title, body, status, created_at as "createdAt", updated_at as "updatedAt" from posts where id = ?',
);
let pending: AuditEvent[] = [];
let flushTimer: NodeJS.Timeout | null = null;
const auditRows = !process.argv.includes('--no-audit-rows');
function flush(): void {
  if (flushTimer !== null) clearTimeout(flushTimer);
  flushTimer = null;
  const batch = pending;
  pending = [];
  // No Kysely transaction is ever open here, so the append runs directly on the connection.
  if (auditRows) appendAudit(sqlite, batch);
}

const serialize = fastJsonStringify(routes.find((r) => r.operationId === 'getPost')!.schema.response['200'] as never);
const tokenLength = Number(process.argv.find((arg) => arg.startsWith('--token-length='))?.slice('--token-length='.length) ?? 36);
const token = randomBytes(tokenLength).toString('base64url').slice(0, tokenLength);
interface Principal {
  token: string;
  subject: string;
  clientId: string;
  clientRegistration: string;
  clientRevocations: number;
  scopes: Set<string>;
  expiresAt: number;
}
const principals = new Map<string, Principal>([
  [
    token.slice(-32),
    { token, subject: userId, clientId: 'bench-client', clientRegistration: 'registration-1', clientRevocations: 0, scopes: new Set(['read:posts']), expiresAt: Date.now() + 3_600_000 },
  ],
]);
// The user's and the client's statuses as last read, trusted for 5 s (the pipeline reads them again then).
const STATUS_MS = 5000;
const users = new Map([[userId, { active: true, role: 'member', readAt: Date.now() }]]);
const clients = new Map([['bench-client', { registration: 'registration-1', revocations: 0, readAt: Date.now() }]]);
const permissions = new Map<string, Set<string>>([['member', new Set(['read_post', 'create_post'])]]);

// The client's budget: a million a second, as the pipeline's benchmark configures it.
const BUDGET = 1_000_000;
const WINDOW_MS = 1000;
const windows = new Map<string, { points: number; endsAt: number }>();
const userWindows = new Map<string, { points: number; endsAt: number }>();
const RATE_LIMIT_POLICY = `"client";q=${BUDGET};w=${WINDOW_MS / 1000}`;

function count(counters: Map<string, { points: number; endsAt: number }>, key: string, now: number): { points: number; endsAt: number } {
  let window = counters.get(key);
  if (window === undefined || window.endsAt <= now) counters.set(key, (window = { points: 0, endsAt: now + WINDOW_MS }));
  window.points++;
  return window;
}

const ID = /^[A-Za-z0-9_-]{1,64}$/;
const ENTITY_TAGS = /^(\*|(W\/)?"[!#-~]*"( *, *(W\/)?"[!#-~]*")*)$/;
// A /v1 path answers JSON, or the vendor type when Accept names it (with version 1).
const VENDOR_MENTIONED = /application\/vnd\.portcullis\+json/i;
const VENDOR_V1 = /application\/vnd\.portcullis\+json\s*;\s*version\s*=\s*"?1"?\s*(,|$)/i;

// Requests by status and their latency (the pipeline's Prometheus counters), and decisions by outcome.
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const requests = new Map<number, { count: number; sum: number; buckets: number[] }>();
const decisions = new Map<string, number>();

const HSTS = 'max-age=31536000; includeSubDomains';

function refuse(request: FastifyRequest, reply: FastifyReply, status: number): void {
  reply.code(status).headers({ 'x-request-id': request.id, 'x-content-type-options': 'nosniff', 'strict-transport-security': HSTS, vary: 'Authorization, Accept' }).send();
}

const app = Fastify({ logger: { level: 'warn' }, genReqId: () => randomUUID() });
app.decorateRequest('principal', null);
app.decorateRequest('resourceId', null);
app.decorateRequest('vendor', false);
app.decorateRequest('traceparent', undefined);
app.addHook('onRequest', (request, reply, done) => {
  let hosts = 0;
  const raw = request.raw.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 4 && raw[i]!.toLowerCase() === 'host') hosts++;
  if (hosts !== 1) return void refuse(request, reply, 400);
  (request as unknown as { traceparent: unknown }).traceparent = request.headers.traceparent;
  const accept = request.headers.accept;
  const vendor = accept !== undefined && VENDOR_MENTIONED.test(accept);
  if (vendor && !VENDOR_V1.test(accept)) return void refuse(request, reply, 406);
  (request as unknown as { vendor: boolean }).vendor = vendor;
  const authorization = request.headers.authorization;
  const bearer = authorization?.startsWith('Bearer ') ? authorization.slice('Bearer '.length) : '';
  // Keyed by the token's tail, confirmed by the whole string, as the pipeline's cache of verified tokens is.
  const principal = principals.get(bearer.slice(-32));
  const now = Date.now();
  if (principal === undefined || principal.token !== bearer || principal.expiresAt <= now) return void refuse(request, reply, 401);
  const user = users.get(principal.subject);
  const client = clients.get(principal.clientId);
  if (user === undefined || client === undefined || user.readAt + STATUS_MS <= now || client.readAt + STATUS_MS <= now) {
    // Read again from the database in the pipeline; here the statuses never change, so they are renewed.
    if (user !== undefined) user.readAt = now;
    if (client !== undefined) client.readAt = now;
  }
  if (!user?.active || client?.registration !== principal.clientRegistration || client.revocations !== principal.clientRevocations) {
    return void refuse(request, reply, 401);
  }
  if (!principal.scopes.has('read:posts') || !permissions.get(user.role)?.has('read_post')) return void refuse(request, reply, 403);
  (request as unknown as { principal: Principal }).principal = principal;
  const byClient = count(windows, principal.clientId, now);
  const byUser = count(userWindows, principal.subject, now);
  const window = byUser.points > byClient.points ? byUser : byClient;
  const reset = Math.max(1, Math.ceil((window.endsAt - now) / 1000));
  reply.headers({
    'x-request-id': request.id,
    'x-content-type-options': 'nosniff',
    'strict-transport-security': HSTS,
    vary: 'Authorization, Accept',
    'ratelimit-policy': RATE_LIMIT_POLICY,
    ratelimit: `"client";r=${Math.max(0, BUDGET - window.points)};t=${reset}`,
  });
  if (window.points > BUDGET) return void reply.code(429).header('retry-after', String(reset)).send();
  done();
});
app.addHook('onResponse', (request, reply, done) => {
  const status = reply.statusCode;
  const seconds = reply.elapsedTime / 1000;
  let series = requests.get(status);
  if (series === undefined) requests.set(status, (series = { count: 0, sum: 0, buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0) }));
  series.count++;
  series.sum += seconds;
  let bucket = 0;
  while (bucket < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[bucket]!) bucket++;
  series.buckets[bucket]!++;
  const principal = (request as unknown as { principal: Principal | null }).principal;
  if (principal === null) return done();
  const decision = status < 400 || status === 429 ? 'allow' : 'deny';
  decisions.set(decision, (decisions.get(decision) ?? 0) + 1);
  const at = Date.now();
  pending.push({
    id: newId(at),
    time: isoTime(at),
    requestId: request.id,
    subject: principal.subject,
    clientId: principal.clientId,
    interface: 'rest',
    operation: 'getPost',
    resourceType: 'post',
    resourceId: (request as unknown as { resourceId: string | null }).resourceId,
    decision,
    reason: 'resource',
    count: null,
    sourceAddress: null,
    firstSeen: null,
    lastSeen: null,
    scopes: null,
    traceId: null,
  });
  if (pending.length >= 50) flush();
  else flushTimer ??= setTimeout(flush, 250);
  done();
});
app.get('/v1/posts/:postId', (request, reply) => {
  const postId = (request.params as { postId: string }).postId;
  const query = request.query as Record<string, unknown>;
  let validQuery = true;
  for (const name in query) if (name !== 'expand' || query[name] !== 'author') validQuery = false;
  const ifNoneMatch = request.headers['if-none-match'];
  if (!ID.test(postId) || !validQuery || (ifNoneMatch !== undefined && (ifNoneMatch.length > 1024 || !ENTITY_TAGS.test(ifNoneMatch)))) {
    return void reply.code(400).send();
  }
  (request as unknown as { resourceId: string }).resourceId = postId;
  const row = selectPost.get(postId) as typeof post | undefined;
  const principal = (request as unknown as { principal: Principal }).principal;
  if (!row || (row.status !== 'published' && row.authorId !== principal.subject)) return void reply.code(404).send();
  const payload = serialize(row);
  const etag = `"${hash('sha256', payload, 'base64url').slice(0, 27)}"`;
  const vendor = (request as unknown as { vendor: boolean }).vendor;
  reply.headers({ 'cache-control': 'private, no-cache', 'content-type': vendor ? 'application/vnd.portcullis+json; version=1' : 'application/json; charset=utf-8', etag });
  if (ifNoneMatch !== undefined && ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)) return void reply.code(304).send();
  reply.send(vendor ? Buffer.from(payload) : payload);
});

await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port, post, token } })}\n`);
process.on('SIGTERM', () => {
  void app.close().then(async () => {
    if (pending.length > 0) flush();
    await auditAppended();
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    process.exit(0);
  });
});
