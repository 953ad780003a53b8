import type { KyselyPlugin, RootOperationNode } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policy } from '../../generated/policy.js';
import type { TokenPrincipal } from '../../src/policy/principal.js';
import { comments } from '../../src/resources/comments.js';
import { listReadable } from '../../src/resources/lists.js';
import { posts } from '../../src/resources/posts.js';
import { resources } from '../../src/resources/registry.js';
import type { ResourceModule } from '../../src/resources/resource-module.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { encodeCursor } from '../../src/storage/paging.js';
import { createTestDatabase, type TestDatabase } from '../helpers/databases.js';

// SQLite's list pages run a prepared statement per query shape instead of building the Kysely query each
// time (src/storage/resource-rows.ts, directPage). These tests hold it to the Kysely query's answers.

function principal(role: string, id: string): TokenPrincipal {
  return {
    kind: 'user',
    subject: id,
    id,
    role,
    clientId: 'app',
    clientRegistrationId: 'app-registration',
    clientRateLimit: null,
    scopes: new Set(['read:posts', 'read:comments']),
    token: { jti: 'j', format: 'jwt', grantType: 'authorization_code', issuedAt: 0, expiresAt: 0 },
  };
}

/** Counts the statements Kysely builds on the resource tables. */
function kyselyReads(): { plugin: KyselyPlugin; count: () => number } {
  let reads = 0;
  return {
    count: () => reads,
    plugin: {
      transformQuery({ node }: { node: RootOperationNode }) {
        if (node.kind === 'SelectQueryNode') reads++;
        return node;
      },
      transformResult: async ({ result }) => result,
    },
  };
}

describe('list pages on SQLite, by prepared statement per query shape', () => {
  let database: TestDatabase;
  const authors = [newId(), newId(), newId()];
  const postIds: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    const db = database.db.kysely;
    const now = nowIso();
    for (const [i, id] of authors.entries()) {
      await db.insertInto('users').values({ id, email: `${id}@example.com`, name: `A${i}`, role: 'member', active: true, passwordHash: 'x', createdAt: now, updatedAt: now }).execute();
    }
    for (let i = 0; i < 30; i++) {
      const id = newId();
      postIds.push(id);
      await db.insertInto('posts').values({ id, authorId: authors[i % 3]!, title: `p${i}`, body: 'b', status: i % 4 === 0 ? 'draft' : 'published', createdAt: now, updatedAt: now }).execute();
      await db.insertInto('comments').values({ id: newId(), postId: id, authorId: authors[(i + 1) % 3]!, body: `c${i}`, createdAt: now, updatedAt: now }).execute();
    }
  });
  afterAll(async () => {
    await database?.drop();
  });

  const cases: { name: string; module: ResourceModule<unknown>; who: TokenPrincipal; values: Record<string, unknown>; page: { limit: number; page?: number; afterId?: string } }[] = [];
  beforeAll(() => {
    const member = principal('member', authors[0]!);
    const editor = principal('editor', newId());
    for (const who of [member, editor]) {
      for (const values of [{}, { status: 'draft' }, { status: 'published', authorId: authors[1] }, { authorId: authors[0] }]) {
        for (const page of [{ limit: 5 }, { limit: 4, page: 3 }, { limit: 7, afterId: postIds[6] }, { limit: 100 }]) {
          cases.push({ name: `${who.role} posts ${JSON.stringify(values)} ${JSON.stringify(page)}`, module: posts as ResourceModule<unknown>, who, values, page });
        }
      }
      // A comment is readable when its post is: the rule's filter is a sub-select on posts.
      cases.push({ name: `${who.role} comments`, module: comments as ResourceModule<unknown>, who, values: {}, page: { limit: 6, afterId: undefined } });
    }
  });

  it('answers every shape exactly as the Kysely query does, then without building a query', async () => {
    const log = kyselyReads();
    const db = database.db.kysely.withPlugin(log.plugin);
    const direct = { db, sqlite: database.db.sqlite, resources, policy };
    const throughKysely = { db, sqlite: null, resources, policy };
    for (const { name, module, who, values, page } of cases) {
      const expected = await listReadable(throughKysely, who, module, values, page);
      const first = await listReadable(direct, who, module, values, page);
      expect(first, name).toEqual(expected);
      // Seen before: the same shape with the same or other values runs its statement, no Kysely query.
      const before = log.count();
      const again = await listReadable(direct, who, module, values, page);
      expect(again, name).toEqual(expected);
      expect(log.count(), name).toBe(before);
    }
    // The pages are what they should be, not only what the two paths agree on.
    const member = principal('member', authors[0]!);
    const all = await listReadable(direct, member, posts as ResourceModule<unknown>, {}, { limit: 100 });
    const readable = postIds.filter((_, i) => i % 4 !== 0 || i % 3 === 0);
    expect(all.rows.map((row) => row.id)).toEqual(readable);
    const second = await listReadable(direct, member, posts as ResourceModule<unknown>, {}, { limit: 5, afterId: readable[4] });
    expect(second).toEqual({ rows: all.rows.slice(5, 10), next: encodeCursor(readable[9]!) });
  });
});
