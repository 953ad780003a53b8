import type { KyselyPlugin, RootOperationNode } from 'kysely';
import type { SqliteHandle } from '../../src/storage/sqlite-handle.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { watchStatements } from '../helpers/sqlite-statements.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

const RESOURCE_TABLES = ['posts', 'users', 'comments'];

/**
 * The resource tables each statement reads while `recording` is on: Kysely's statements through a plugin,
 * and on SQLite the direct ones (prepared on the handle, run without Kysely) through a wrapped handle.
 */
function statementLog() {
  const log = { recording: false, tables: [] as string[] };
  const plugin: KyselyPlugin = {
    transformQuery({ node }: { node: RootOperationNode }) {
      const table = (node as any).from?.froms?.[0]?.table?.identifier?.name;
      if (log.recording && RESOURCE_TABLES.includes(table)) log.tables.push(table);
      return node;
    },
    transformResult: async ({ result }) => result,
  };
  const countStatements = (handle: SqliteHandle): SqliteHandle =>
    watchStatements(
      handle,
      (sql) => (RESOURCE_TABLES.includes(/\bfrom "?([a-z_]+)"?/.exec(sql)?.[1] ?? '') ? ['get', 'all', 'iterate', 'run'] : []),
      ({ sql }) => {
        if (log.recording) log.tables.push(/\bfrom "?([a-z_]+)"?/.exec(sql)![1]!);
      },
    );
  return { log, plugin, countStatements };
}

describe.each(DATABASE_KINDS)('GraphQL resolves in batches on %s', (kind) => {
  const { log, plugin, countStatements } = statementLog();
  let t: TestApp;
  let reader: TestUser;
  let authors: TestUser[];

  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' }, { wrapDb: (db) => ({ ...db, kysely: db.kysely.withPlugin(plugin), sqlite: db.sqlite && countStatements(db.sqlite) }) });
    reader = await t.createUser('editor');
    authors = await Promise.all(Array.from({ length: 10 }, () => t.createUser('member')));
    const db = t.database.db.kysely;
    const now = nowIso();
    for (let i = 0; i < 100; i++) {
      const postId = newId();
      await db.insertInto('posts').values({ id: postId, authorId: authors[i % 10]!.id, title: `post ${i}`, body: 'b', status: 'published', createdAt: now, updatedAt: now }).execute();
      for (let c = 0; c < i % 3; c++) {
        await db.insertInto('comments').values({ id: newId(), postId, authorId: authors[c]!.id, body: `comment ${c}`, createdAt: now, updatedAt: now }).execute();
      }
    }
  });
  afterAll(() => t.close());

  it('reads 100 posts with their authors and comment counts in one statement per table', async () => {
    const token = await reader.token();
    const query = '{ posts(first: 100) { nodes { id title commentCount author { id name } } } }';
    // Once first: the token's first use reads its user's status (cached afterwards), and the first load of a
    // table compiles its query (the plugin sees the compilation too). Neither is the query's work.
    expect((await t.request({ method: 'POST', url: '/graphql', token, body: { query } })).statusCode).toBe(200);
    log.tables.length = 0;
    log.recording = true;
    const res = await t.request({ method: 'POST', url: '/graphql', token, body: { query } });
    log.recording = false;
    expect(res.statusCode, res.body).toBe(200);
    const nodes = res.json().data.posts.nodes as { title: string; commentCount: number; author: { id: string } }[];
    expect(nodes).toHaveLength(100);
    for (const node of nodes) {
      const i = Number(node.title.split(' ')[1]);
      expect({ commentCount: node.commentCount, author: node.author.id }).toEqual({ commentCount: i % 3, author: authors[i % 10]!.id });
    }
    expect(log.tables.sort()).toEqual(['comments', 'posts', 'users']);
  });

  it('runs the fields of a mutation one after another, in document order', async () => {
    const token = await reader.token();
    const res = await t.request({
      method: 'POST',
      url: '/graphql',
      token,
      body: {
        query: `mutation {
          first: createPost(input: { title: "one", body: "b", status: draft }) { id }
          second: createPost(input: { title: "two", body: "b", status: draft }) { id }
          third: createPost(input: { title: "three", body: "b", status: draft }) { id }
        }`,
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    const { first, second, third } = res.json().data as Record<string, { id: string }>;
    // Ids are time-ordered: each was created after the one before it in the document had been.
    expect([first!.id, second!.id, third!.id]).toEqual([first!.id, second!.id, third!.id].sort());
    const rows = await t.database.db.kysely.selectFrom('posts').select(['id', 'title']).where('id', 'in', [first!.id, second!.id, third!.id]).orderBy('id').execute();
    expect(rows.map((row) => row.title)).toEqual(['one', 'two', 'three']);
  });

  it('answers every run of a mutation document whose later argument does not coerce, and runs nothing after it', async () => {
    const member = await t.createUser('member');
    const token = await member.token();
    const query = `mutation M($id: ID = "zz") {
      a: createPost(input: { title: "ran", body: "a", status: draft }) { id }
      b: deletePost(id: $id)
      c: createPost(input: { title: "never", body: "c", status: draft }) { id }
    }`;
    for (let run = 0; run < 3; run++) {
      const res = await t.request({ method: 'POST', url: '/graphql', token, body: { query, variables: { id: null } } });
      expect({ status: res.statusCode, body: res.json() }).toEqual({
        status: 400,
        body: {
          data: null,
          errors: [{ message: 'Argument "id" of non-null type "ID!" must not be null.', locations: [{ line: 3, column: 25 }], path: ['b'], extensions: { code: 'VALIDATION_FAILED' } }],
        },
      });
    }
    const titles = (await t.database.db.kysely.selectFrom('posts').select('title').where('authorId', '=', member.id).execute()).map((row) => row.title);
    expect(titles).toEqual(['ran', 'ran', 'ran']);
  });

  it('stops at a refused mutation: the request fails with its status and the mutations after it do not run', async () => {
    const member = await t.createUser('member');
    const token = await member.token();
    const query = `mutation ($theirs: ID!, $title: String!) {
      mine: createPost(input: { title: $title, body: "before", status: draft }) { id }
      refused: deletePost(id: $theirs)
      after: createPost(input: { title: "never", body: "after", status: draft }) { id }
    }`;
    const before = await t.database.db.kysely.selectFrom('posts').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    // Twice: the document's first run is graphql-js's, later ones run its compiled (JIT) form.
    for (const title of ['first run', 'compiled run']) {
      const theirs = (await t.database.db.kysely.selectFrom('posts').select('id').where('authorId', '!=', member.id).executeTakeFirstOrThrow()).id;
      const res = await t.request({ method: 'POST', url: '/graphql', token, body: { query, variables: { theirs, title } } });
      expect({ status: res.statusCode, body: res.json() }).toEqual({
        status: 404,
        body: {
          data: null,
          errors: [{ message: 'The resource does not exist.', locations: [{ line: 3, column: 7 }], path: ['refused'], extensions: { code: 'NOT_FOUND' } }],
        },
      });
      const theirPost = await t.database.db.kysely.selectFrom('posts').select('id').where('id', '=', theirs).executeTakeFirst();
      expect(theirPost).toEqual({ id: theirs });
    }
    const mine = await t.database.db.kysely.selectFrom('posts').select(['title', 'body']).where('authorId', '=', member.id).orderBy('id').execute();
    expect(mine).toEqual([
      { title: 'first run', body: 'before' },
      { title: 'compiled run', body: 'before' },
    ]);
    const after = await t.database.db.kysely.selectFrom('posts').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(Number(before.n) + 2);
  });
});
