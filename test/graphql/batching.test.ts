import type { KyselyPlugin, RootOperationNode } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId, nowIso } from '../../src/storage/ids.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

/** The resource tables each Kysely statement reads, while `recording` is on (resource reads all go through Kysely). */
function statementLog() {
  const log = { recording: false, tables: [] as string[] };
  const plugin: KyselyPlugin = {
    transformQuery({ node }: { node: RootOperationNode }) {
      const table = (node as any).from?.froms?.[0]?.table?.identifier?.name;
      if (log.recording && ['posts', 'users', 'comments'].includes(table)) log.tables.push(table);
      return node;
    },
    transformResult: async ({ result }) => result,
  };
  return { log, plugin };
}

describe.each(DATABASE_KINDS)('GraphQL resolves in batches on %s', (kind) => {
  const { log, plugin } = statementLog();
  let t: TestApp;
  let reader: TestUser;
  let authors: TestUser[];

  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' }, { wrapDb: (db) => ({ ...db, kysely: db.kysely.withPlugin(plugin) }) });
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
    // The token's first use reads its user's status (authentication, cached afterwards): not the query's work.
    expect((await t.request({ method: 'POST', url: '/graphql', token, body: { query: '{ __typename }' } })).statusCode).toBe(200);
    log.tables.length = 0;
    log.recording = true;
    const res = await t.request({ method: 'POST', url: '/graphql', token, body: { query: '{ posts(first: 100) { nodes { id title commentCount author { id name } } } }' } });
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
});
