/**
 * Reference point (a): the GraphQL pipeline's work written by hand on Mercurius with no layers — a hook that
 * looks the token up in a map, prepared SQLite statements (the post, a page of posts), the authors through
 * Mercurius' batched loaders, the editor's read rule inlined, and one hash-chained audit row per root field,
 * appended in batches of 200. No limits, policy table, input validation or error mapping.
 */
import Fastify from 'fastify';
import mercurius from 'mercurius';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import { openDb } from '../../src/storage/dialect.js';
import { isoTime, newId } from '../../src/storage/ids.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { insertBenchData } from './graphql-data.js';
import { appendAudit, auditAppended } from './reference-audit.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-bench-'));
const db = await openDb({ databaseUrl: null, dataDir, backgroundCheckpoints: true });
await migrateToLatest(db);
const sqlite = db.sqlite!;
const data = await insertBenchData(db.kysely);

const POST_COLUMNS = 'id, author_id as "authorId", title, body, status, created_at as "createdAt", updated_at as "updatedAt"';
const selectPost = sqlite.prepare(`select ${POST_COLUMNS} from posts where id = ?`);
const selectPage = sqlite.prepare(`select ${POST_COLUMNS} from posts where status = 'published' order by id limit ?`);
const selectUsers = (count: number) => sqlite.prepare(`select id, name, email, role, active, created_at as "createdAt", updated_at as "updatedAt" from users where id in (${new Array(count).fill('?').join(', ')})`);

let pending: AuditEvent[] = [];
function audit(requestId: string, subject: string, operation: string, resourceId: string | null): void {
  const at = Date.now();
  pending.push({
    id: newId(at),
    time: isoTime(at),
    requestId,
    subject,
    clientId: 'bench-client',
    interface: 'graphql',
    operation,
    resourceType: resourceId === null ? null : 'post',
    resourceId,
    decision: 'allow',
    reason: resourceId === null ? 'granted' : 'resource',
    count: null,
    sourceAddress: null,
    firstSeen: null,
    lastSeen: null,
    scopes: null,
    traceId: null,
  });
  if (pending.length >= 200) flush();
}
function flush(): void {
  const batch = pending;
  pending = [];
  appendAudit(sqlite, batch);
}

const token = randomUUID();
const principals = new Map<string, { subject: string; scopes: Set<string> }>([[token, { subject: data.readerId, scopes: new Set(['read:posts', 'read:users']) }]]);
interface Context {
  principal: { subject: string };
  requestId: string;
}

const app = Fastify({ logger: { level: 'warn' } });
await app.register(mercurius, {
  schema: fs.readFileSync('schema.graphql', 'utf8'),
  // The same execution as the pipeline's: a document is compiled (graphql-jit) once it has run once.
  jit: 1,
  resolvers: {
    Query: {
      post: (_root: unknown, { id }: { id: string }, ctx: Context) => {
        audit(ctx.requestId, ctx.principal.subject, 'Query.post', id);
        const row = selectPost.get(id) as { status: string } | undefined;
        return row && row.status === 'published' ? row : null;
      },
      posts: (_root: unknown, { first }: { first: number }, ctx: Context) => {
        audit(ctx.requestId, ctx.principal.subject, 'Query.posts', null);
        return { nodes: selectPage.all(first), pageInfo: { endCursor: null, hasNextPage: false } };
      },
    },
  } as never,
  loaders: {
    Post: {
      // The reader is an editor: every author's profile is readable.
      author: async (queries: { obj: { authorId: string } }[]) => {
        const ids = [...new Set(queries.map((query) => query.obj.authorId))];
        const byId = new Map((selectUsers(ids.length).all(...ids) as { id: string }[]).map((user) => [user.id, user]));
        return queries.map((query) => byId.get(query.obj.authorId) ?? null);
      },
    },
  },
  context: (request) => {
    const principal = principals.get((request.headers.authorization ?? '').slice('Bearer '.length));
    if (!principal) throw new Error('unauthenticated');
    return { principal, requestId: randomUUID() };
  },
});

await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port, postId: data.posts[0]!.id, token } })}\n`);
process.on('SIGTERM', () => {
  void app.close().then(async () => {
    if (pending.length > 0) flush();
    await auditAppended();
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    process.exit(0);
  });
});
