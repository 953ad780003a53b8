/**
 * Reference point: the work the pipeline does for GET /v1/posts/{postId}, written by hand with no layers —
 * one hook that looks the token up in a map, the post read with a prepared SQLite statement, the same
 * response serialiser, sha256 ETag and headers, and the same hash-chained audit append in batches of 200.
 * No validation, negotiation, rate limiting, idempotency or policy table. The distance between this and
 * the bare route is the cost of the work itself; the distance between the pipeline and this is what the
 * pipeline's structure costs. With `--no-audit-rows` it skips only the audit append, to show what the
 * durable audit row alone costs.
 */
import Fastify from 'fastify';
import fastJsonStringify from 'fast-json-stringify';
import { hash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { routes } from '../../generated/routes.js';
import { appendOnSqlite } from '../../src/audit/append-events.js';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import { openDb } from '../../src/storage/dialect.js';
import { isoTime, newId } from '../../src/storage/ids.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { insertUser } from '../../src/storage/users.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-bench-'));
const db = await openDb({ databaseUrl: null, dataDir, backgroundCheckpoints: true });
await migrateToLatest(db);
const sqlite = db.sqlite!;
const userId = newId();
const now = isoTime(Date.now());
await insertUser(db.kysely, { id: userId, email: 'bench@example.com', name: 'Bench', role: 'member', active: true, passwordHash: 'unused' }, now);
const post = { id: newId(), authorId: userId, title: 'Benchmark post', body: 'A post read over and over.', status: 'published', createdAt: now, updatedAt: now };
await db.kysely.insertInto('posts').values(post).execute();

const selectPost = sqlite.prepare(
  'select id, author_id as "authorId", title, body, status, created_at as "createdAt", updated_at as "updatedAt" from posts where id = ?',
);
let pending: AuditEvent[] = [];
const auditRows = !process.argv.includes('--no-audit-rows');
function flush(): void {
  const batch = pending;
  pending = [];
  // No Kysely transaction is ever open here, so the append runs directly on the connection.
  if (auditRows) appendOnSqlite(sqlite, batch);
}

const serialize = fastJsonStringify(routes.find((r) => r.operationId === 'getPost')!.schema.response['200'] as never);
const token = randomUUID();
const principals = new Map<string, { subject: string; clientId: string; scopes: Set<string> }>([[token, { subject: userId, clientId: 'bench-client', scopes: new Set(['read:posts']) }]]);

const app = Fastify({ logger: { level: 'warn' }, genReqId: () => randomUUID() });
app.decorateRequest('principal', null);
app.addHook('onRequest', (request, reply, done) => {
  const principal = principals.get((request.headers.authorization ?? '').slice('Bearer '.length));
  if (!principal || !principal.scopes.has('read:posts')) return void reply.code(401).send();
  (request as unknown as { principal: typeof principal }).principal = principal;
  reply.headers({
    'x-request-id': request.id,
    'x-content-type-options': 'nosniff',
    vary: 'Authorization, Accept',
    'ratelimit-policy': '"client";q=1000000;w=60',
    ratelimit: '"client";r=999999;t=60',
  });
  done();
});
app.addHook('onResponse', (request, _reply, done) => {
  const principal = (request as unknown as { principal: { subject: string; clientId: string } }).principal;
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
    resourceId: (request.params as { postId: string }).postId,
    decision: 'allow',
    reason: 'resource',
    count: null,
    sourceAddress: null,
    firstSeen: null,
    lastSeen: null,
    scopes: null,
    traceId: null,
  });
  if (pending.length >= 200) flush();
  done();
});
app.get('/v1/posts/:postId', (request, reply) => {
  const row = selectPost.get((request.params as { postId: string }).postId) as typeof post | undefined;
  if (!row || (row.status !== 'published' && row.authorId !== userId)) return void reply.code(404).send();
  const payload = serialize(row);
  reply.headers({
    'cache-control': 'private, no-cache',
    'content-type': 'application/json; charset=utf-8',
    etag: `"${hash('sha256', payload, 'base64url').slice(0, 27)}"`,
  });
  reply.send(payload);
});

await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port, post, token } })}\n`);
process.on('SIGTERM', () => {
  void app.close().then(async () => {
    if (pending.length > 0) flush();
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    process.exit(0);
  });
});
