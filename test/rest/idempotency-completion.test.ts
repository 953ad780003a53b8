import { InsertQueryNode, TableNode, UpdateQueryNode, type KyselyPlugin, type OperationNode, type QueryId } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { watchStatements } from '../helpers/sqlite-statements.js';
import { PENDING_MS, RETENTION_MS } from '../../src/rest/idempotency.js';
import { purgeExpiredIdempotencyKeys } from '../../src/storage/idempotency-keys.js';
import type { SqliteHandle } from '../../src/storage/sqlite-handle.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const ID = /^[0-9a-f]{32}$/;

type Res = Awaited<ReturnType<TestApp['request']>>;
type KeyRow = { status: number; createdAt: string; expiresAt: string };

function tableOf(node: OperationNode): string | undefined {
  const table = UpdateQueryNode.is(node) ? node.table : InsertQueryNode.is(node) ? node.into : undefined;
  return table && TableNode.is(table) ? table.table.identifier.name : undefined;
}

/**
 * The app's statements as the database would see them, with two seams: storing a key's response (the
 * UPDATE of idempotency_keys) fails while `completionFailures` is above zero, as a dropped connection does;
 * and `afterPostInsert` runs once a post is inserted, while its request has yet to store its response.
 */
function faultyDatabase() {
  const seams = {
    completionFailures: 0,
    completionAttempts: 0,
    afterPostInsert: undefined as (() => Promise<void>) | undefined,
  };
  const postInserts = new Set<QueryId>();
  const plugin: KyselyPlugin = {
    transformQuery({ node, queryId }) {
      // After CamelCasePlugin (the app's own plugin runs first): table names as the database spells them.
      if (UpdateQueryNode.is(node) && tableOf(node) === 'idempotency_keys') {
        seams.completionAttempts++;
        if (seams.completionFailures > 0) {
          seams.completionFailures--;
          throw Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' });
        }
      }
      if (InsertQueryNode.is(node) && tableOf(node) === 'posts') postInserts.add(queryId);
      return node;
    },
    async transformResult({ result, queryId }) {
      if (postInserts.delete(queryId)) await seams.afterPostInsert?.();
      return result;
    },
  };
  /**
   * On SQLite a post is inserted by its prepared statement (resource-rows.ts), not through Kysely: the
   * handle's statement runs the seam once the row is written, inside the insert's transaction.
   */
  const handle = (sqlite: SqliteHandle): SqliteHandle =>
    watchStatements(
      sqlite,
      (sql) => (/^insert into "posts"/.test(sql) ? ['run'] : []),
      () => void seams.afterPostInsert?.(),
    );
  return { seams, plugin, handle };
}

describe.each(DATABASE_KINDS)('Idempotency-Key when the response cannot be stored at once, on %s', (kind) => {
  const { seams, plugin, handle } = faultyDatabase();
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp(kind, {}, { wrapDb: (db) => ({ ...db, kysely: db.kysely.withPlugin(plugin), sqlite: db.sqlite && handle(db.sqlite) }) });
  });
  afterAll(async () => {
    await t?.close();
  });
  afterEach(() => {
    Object.assign(seams, { completionFailures: 0, completionAttempts: 0, afterPostInsert: undefined });
  });

  function post(token: string, key: string, body: unknown): Promise<Res> {
    return t.request({ method: 'POST', url: '/v1/posts', token, headers: { 'idempotency-key': key }, body });
  }

  async function postsBy(user: TestUser) {
    return t.database.db.kysely.selectFrom('posts').selectAll().where('authorId', '=', user.id).orderBy('id').execute();
  }

  /**
   * The key's row through a connection of its own (SQLite: the handle, outside Kysely's one connection, read
   * at once: the seam runs it inside the insert's transaction, which holds that connection).
   */
  async function keyRow(key: string): Promise<KeyRow | undefined> {
    const sqlite = t.database.db.sqlite;
    if (sqlite) {
      return sqlite.prepare('select status, created_at as "createdAt", expires_at as "expiresAt" from idempotency_keys where key = ?').get(key) as KeyRow | undefined;
    }
    return t.database.db.kysely.selectFrom('idempotencyKeys').select(['status', 'createdAt', 'expiresAt']).where('key', '=', key).executeTakeFirst();
  }

  const lifetime = (row: KeyRow) => Date.parse(row.expiresAt) - Date.parse(row.createdAt);

  it('keeps a key pending for the short pending lifetime and, once answered, for 24 hours from its claim', async () => {
    const user = await t.createUser('member');
    const token = await user.token();
    let whileRunning: KeyRow | undefined;
    seams.afterPostInsert = async () => {
      whileRunning = await keyRow('normal-key');
    };

    const first = await post(token, 'normal-key', { title: 'Normal', body: '', status: 'draft' });
    expect(first.statusCode, first.body).toBe(201);
    expect(whileRunning).toBeDefined();
    expect({ status: whileRunning!.status, lifetime: lifetime(whileRunning!) }).toEqual({ status: 0, lifetime: PENDING_MS });

    const completed = (await keyRow('normal-key'))!;
    expect({ status: completed.status, createdAt: completed.createdAt, lifetime: lifetime(completed) }).toEqual({
      status: 201,
      createdAt: whileRunning!.createdAt,
      lifetime: RETENTION_MS,
    });
    expect(seams.completionAttempts).toBe(1);
    // Past the pending lifetime the purge keeps it: it is answered and kept for the day.
    await purgeExpiredIdempotencyKeys(t.database.db.kysely, new Date(Date.parse(completed.createdAt) + PENDING_MS + 1000).toISOString());
    expect(await keyRow('normal-key')).toEqual(completed);
  });

  it('tries again to store the response when the first try fails: the client gets its 201, and a retry the replay', async () => {
    const user = await t.createUser('member');
    const token = await user.token();
    const body = { title: 'Stored on the second try', body: '', status: 'published' };
    seams.completionFailures = 1;

    const first = await post(token, 'transient-key', body);
    expect({ status: first.statusCode, replayed: first.headers['idempotent-replayed'] }, first.body).toEqual({ status: 201, replayed: undefined });
    const created = first.json();
    expect(created).toEqual({
      id: expect.stringMatching(ID),
      authorId: user.id,
      title: body.title,
      body: '',
      status: 'published',
      createdAt: expect.any(String),
      updatedAt: created.createdAt,
    });
    expect(seams.completionAttempts).toBe(2);
    expect(lifetime((await keyRow('transient-key'))!)).toBe(RETENTION_MS);

    const again = await post(token, 'transient-key', body);
    expect({
      status: again.statusCode,
      type: again.headers['content-type'],
      location: again.headers.location,
      replayed: again.headers['idempotent-replayed'],
      body: again.json(),
    }).toEqual({ status: 201, type: JSON_TYPE, location: `/v1/posts/${created.id}`, replayed: 'true', body: created });
    expect(await postsBy(user)).toHaveLength(1);
  });

  it('answers 503 when the response cannot be stored at all, and frees the key after the pending lifetime, not 24 hours', async () => {
    const user = await t.createUser('member');
    const token = await user.token();
    const body = { title: 'Never stored', body: '', status: 'draft' };
    seams.completionFailures = Number.POSITIVE_INFINITY;

    const failed = await post(token, 'lost-key', body);
    expect({ status: failed.statusCode, type: failed.headers['content-type'], retryAfter: failed.headers['retry-after'], body: failed.json() }).toEqual({
      status: 503,
      type: JSON_TYPE,
      retryAfter: '2',
      body: { error: { code: 'UNAVAILABLE', message: 'The service is temporarily unavailable.' } },
    });
    // Three tries, then the client is told; the post was created all the same.
    expect(seams.completionAttempts).toBe(3);
    seams.completionFailures = 0;
    const [lost] = await postsBy(user);
    expect(lost).toMatchObject({ title: body.title });

    const pending = (await keyRow('lost-key'))!;
    expect({ status: pending.status, lifetime: lifetime(pending) }).toEqual({ status: 0, lifetime: PENDING_MS });
    // Within the pending lifetime the key is still taken.
    const early = await post(token, 'lost-key', body);
    expect({ status: early.statusCode, body: early.json() }).toEqual({
      status: 409,
      body: { error: { code: 'CONFLICT', message: 'A request with this Idempotency-Key is still being processed.' } },
    });

    // The pending lifetime is over: the retry runs again (the documented cost: a second post).
    await t.database.db.kysely.updateTable('idempotencyKeys').set({ expiresAt: new Date(Date.now() - 1000).toISOString() }).where('key', '=', 'lost-key').execute();
    const retry = await post(token, 'lost-key', body);
    expect({ status: retry.statusCode, replayed: retry.headers['idempotent-replayed'] }, retry.body).toEqual({ status: 201, replayed: undefined });
    expect(retry.json().id).not.toBe(lost!.id);
    const replay = await post(token, 'lost-key', body);
    expect({ status: replay.statusCode, replayed: replay.headers['idempotent-replayed'], body: replay.json() }).toEqual({ status: 201, replayed: 'true', body: retry.json() });
    expect(await postsBy(user)).toHaveLength(2);

    // And a pending key that nobody retries is purged once its pending lifetime is over.
    seams.completionFailures = Number.POSITIVE_INFINITY;
    expect((await post(token, 'abandoned-key', body)).statusCode).toBe(503);
    const abandoned = (await keyRow('abandoned-key'))!;
    await purgeExpiredIdempotencyKeys(t.database.db.kysely, abandoned.expiresAt);
    expect(await keyRow('abandoned-key')).toBeUndefined();
  });
});
