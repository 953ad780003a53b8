import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASE_KINDS, POSTGRES_ADMIN_URL } from '../helpers/databases.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const INTERNAL = { error: { code: 'INTERNAL', message: 'An internal error occurred.' } };
const UNAVAILABLE = { error: { code: 'UNAVAILABLE', message: 'The service is temporarily unavailable.' } };

type Res = Awaited<ReturnType<TestApp['request']>>;

/** Words that would reveal the database, the query or the code behind a failure. */
const LEAKS = [
  /sqlite/i, /no such table/i, /relation/i, /does not exist/i, /select /i, /insert /i, /portcullis_test_/, /42P01|3D000|57P01/,
  /ECONNREFUSED/, /\bat \S+:\d+/, /stack/i, /\.ts\b/, /postgres/i, /comments/,
];

function expectNoLeak(res: Res) {
  for (const pattern of LEAKS) expect(res.body, String(pattern)).not.toMatch(pattern);
}

/** The answer, whole; a 503 tells the client when to retry. */
function expectExactly(res: Res, status: number, body: unknown) {
  expect({ status: res.statusCode, type: res.headers['content-type'], retryAfter: res.headers['retry-after'], body: res.json() }).toEqual({
    status,
    type: JSON_TYPE,
    retryAfter: status === 503 ? '2' : undefined,
    body,
  });
  expectNoLeak(res);
}

describe.each(DATABASE_KINDS)('REST failures on %s', (kind) => {
  let t: TestApp | undefined;

  afterEach(async () => {
    vi.restoreAllMocks();
    await t?.close();
    t = undefined;
  });

  it('answers a database error (a dropped table) with 500 INTERNAL and nothing else', async () => {
    t = await startTestApp(kind);
    const user = await t.createUser('member');
    const token = await user.token();
    const post = (await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'P', body: '', status: 'published' } })).json();
    await sql`drop table comments`.execute(t.app.db.kysely);

    expectExactly(await t.request({ url: `/v1/comments/${post.id}`, token }), 500, INTERNAL);
    expectExactly(await t.request({ url: `/v1/posts/${post.id}/comments`, token }), 500, INTERNAL);
    expectExactly(await t.request({ method: 'POST', url: `/v1/posts/${post.id}/comments`, token, body: { body: 'c' } }), 500, INTERNAL);
    expectExactly(await t.request({ method: 'DELETE', url: `/v1/posts/${post.id}`, token }), 500, INTERNAL);
    const failed = await t.request({ url: `/v1/comments/${post.id}`, token });
    expect(failed.headers['cache-control']).toBe('no-store');

    // The server keeps serving what does not need the dropped table.
    const read = await t.request({ url: `/v1/posts/${post.id}`, token });
    expect(read.statusCode).toBe(200);
    expect(read.json()).toEqual(post);
    expect((await t.request({ url: '/readyz' })).statusCode).toBe(200);
  });

  it('answers a failing handler with 500 INTERNAL without the error message', async () => {
    t = await startTestApp(kind);
    const token = await (await t.createUser('member')).token();
    const kysely = t.app.db.kysely;
    const insertInto = kysely.insertInto.bind(kysely);
    vi.spyOn(kysely, 'insertInto').mockImplementation(((table: never) => {
      if (table === 'posts') throw new Error('insert into "posts" failed: SQLITE_CONSTRAINT at /work/main/src/operations/posts.ts:45');
      return insertInto(table);
    }) as typeof kysely.insertInto);
    expectExactly(await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'x', body: '', status: 'draft' } }), 500, INTERNAL);
    // A failed first attempt does not burn its Idempotency-Key.
    const key = { 'idempotency-key': 'after-failure' };
    expectExactly(await t.request({ method: 'POST', url: '/v1/posts', token, headers: key, body: { title: 'x', body: '', status: 'draft' } }), 500, INTERNAL);
    vi.restoreAllMocks();
    const retry = await t.request({ method: 'POST', url: '/v1/posts', token, headers: key, body: { title: 'x', body: '', status: 'draft' } });
    expect(retry.statusCode).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
  });

  it('answers an unreachable dependency with 503 UNAVAILABLE', async () => {
    t = await startTestApp(kind);
    const token = await (await t.createUser('member')).token();
    const kysely = t.app.db.kysely;
    vi.spyOn(kysely, 'selectFrom').mockImplementation((() => {
      throw Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:5432'), { code: 'ECONNREFUSED' });
    }) as typeof kysely.selectFrom);
    expectExactly(await t.request({ url: '/v1/posts', token }), 503, UNAVAILABLE);
    expect((await t.request({ url: '/v1/posts', token })).body).not.toContain('10.1.2.3');
  });

  it('reports /readyz 503 in the error shape when the database is gone, while /healthz stays 200', async () => {
    t = await startTestApp(kind);
    const token = await (await t.createUser('member')).token();
    expect((await t.request({ url: '/readyz' })).json()).toEqual({ status: 'ready' });

    if (kind === 'postgres') {
      await dropDatabase(t);
    } else {
      await t.app.db.close();
    }

    const ready = await t.request({ url: '/readyz' });
    expectExactly(ready, 503, { error: { code: 'UNAVAILABLE', message: 'The database is not reachable.' } });
    expect(ready.headers['cache-control']).toBe('no-store');
    const health = await t.request({ url: '/healthz' });
    expect({ status: health.statusCode, body: health.json() }).toEqual({ status: 200, body: { status: 'ok' } });

    // API requests fail cleanly, with nothing from the driver: on PostgreSQL the database is unreachable (503);
    // on SQLite the test closed the app's own handle, which is a programming error there (500), never a crash.
    const [status, body] = kind === 'postgres' ? [503, UNAVAILABLE] : [500, INTERNAL];
    expectExactly(await t.request({ url: '/v1/posts', token }), status, body);
    expectExactly(await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'x', body: '', status: 'draft' } }), status, body);
  });

  if (kind === 'postgres') {
    it('answers 503 UNAVAILABLE, never a crash or a driver message, when the database connections are cut', async () => {
      t = await startTestApp(kind);
      const user = await t.createUser('member');
      const jwt = await user.token();
      const opaque = await user.token(undefined, { format: 'opaque' });
      const post = (await t.request({ method: 'POST', url: '/v1/posts', token: jwt, body: { title: 'P', body: '', status: 'published' } })).json();

      // Backends killed: a request fails with 503 or (after the pool reconnects) succeeds.
      await terminateBackends(t);
      let recovered = false;
      for (let i = 0; i < 5 && !recovered; i++) {
        const res = await t.request({ url: `/v1/posts/${post.id}`, token: jwt });
        if (res.statusCode === 200) {
          expect(res.json()).toEqual(post);
          recovered = true;
        } else {
          expectExactly(res, 503, UNAVAILABLE);
        }
      }
      expect(recovered).toBe(true);

      // The database is gone for good: every kind of request is a clean 503.
      await dropDatabase(t);
      for (const req of [
        { url: '/v1/posts', token: jwt },
        { url: `/v1/posts/${post.id}`, token: jwt },
        { url: `/v1/posts/${post.id}`, token: opaque },
        { method: 'POST', url: '/v1/posts', token: jwt, body: { title: 'x', body: '', status: 'draft' } },
        { method: 'POST', url: '/v1/posts', token: jwt, headers: { 'idempotency-key': 'k' }, body: { title: 'x', body: '', status: 'draft' } },
        { method: 'DELETE', url: `/v1/posts/${post.id}`, token: jwt },
      ]) {
        expectExactly(await t.request(req), 503, UNAVAILABLE);
      }
      expect((await t.request({ url: '/healthz' })).statusCode).toBe(200);
    });

    it('answers 503 UNAVAILABLE while the database refuses connections (ALLOW_CONNECTIONS false), and serves again once it takes them', async () => {
      t = await startTestApp(kind);
      const token = await (await t.createUser('member')).token();
      const name = databaseName(t);
      await withAdmin((c) => c.query(`alter database ${name} allow_connections false`));
      try {
        await terminateBackends(t);
        for (let i = 0; i < 3; i++) expectExactly(await t.request({ url: '/v1/posts', token }), 503, UNAVAILABLE);
        expectExactly(await t.request({ url: '/readyz' }), 503, { error: { code: 'UNAVAILABLE', message: 'The database is not reachable.' } });
      } finally {
        await withAdmin((c) => c.query(`alter database ${name} allow_connections true`));
      }
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200);
    });
  }
});

function databaseName(t: TestApp): string {
  return new URL(t.database.url!).pathname.slice(1);
}

async function withAdmin<T>(run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

async function terminateBackends(t: TestApp): Promise<void> {
  await withAdmin((c) => c.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [databaseName(t)]));
}

/** What the test helper's drop does: the pool's connections are cut and cannot come back. */
async function dropDatabase(t: TestApp): Promise<void> {
  await withAdmin((c) => c.query(`drop database ${databaseName(t)} with (force)`));
}
