import fs from 'node:fs';
import type { KyselyPlugin, RootOperationNode } from 'kysely';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policy } from '../../generated/policy.js';
import { resourceTypeAccess } from '../../src/policy/decide.js';
import { ResourceLoaders } from '../../src/resources/loaders.js';
import { posts } from '../../src/resources/posts.js';
import { ResourceRegistry, resources } from '../../src/resources/registry.js';
import { defineResource } from '../../src/resources/resource-module.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';
import { contractDisagreements } from '../helpers/resource-contract.js';

const contract = YAML.parse(fs.readFileSync('openapi.yaml', 'utf8'));

describe('resource modules', () => {
  it('give each embeddable type one read access: its GraphQL type\'s @auth equals its REST get operation\'s scopes and permission', () => {
    const embedded = new Set(resources.types().flatMap((type) => Object.values(resources.get(type).expansions).map((expansion) => expansion.type)));
    expect([...embedded].sort()).toEqual(['post', 'user']);
    for (const type of embedded) {
      const access = resourceTypeAccess(policy, type);
      const gets = Object.values(policy.operations).filter((op) => /^rest:get/.test(op.id) && op.resource?.type === type && op.resource.action === 'read');
      expect(gets).toHaveLength(1);
      expect({ scopes: access?.scopes, permission: access?.permission }).toEqual({ scopes: gets[0]!.scopes, permission: gets[0]!.permission });
    }
    expect(resourceTypeAccess(policy, 'client')).toBeNull();
  });

  it('cover exactly the resource types of policy.yaml', () => {
    expect(resources.types().sort()).toEqual(Object.keys(policy.resources).sort());
    expect(() => resources.check(policy)).not.toThrow();
  });

  it('agree with the contract on expansions and list filters', () => {
    expect(contractDisagreements(contract, policy, resources)).toEqual([]);
  });

  it('disagree as soon as the contract or a module drifts', () => {
    const drifted = structuredClone(contract);
    drifted.components.parameters.PostExpand.schema.items.enum.push('comments');
    drifted.components.parameters.PostStatus.name = 'state';
    const postWithoutAuthor = defineResource({ ...posts, expansions: {} });
    expect(contractDisagreements(drifted, policy, resources)).toEqual([
      'listUserPosts (GET /v1/users/{userId}/posts): expand lists [author, comments], the post module [author]',
      'listUserPosts (GET /v1/users/{userId}/posts): query parameter state is not a filter of the post module',
      'listPosts (GET /v1/posts): expand lists [author, comments], the post module [author]',
      'listPosts (GET /v1/posts): query parameter state is not a filter of the post module',
      'getPost (GET /v1/posts/{postId}): expand lists [author, comments], the post module [author]',
      'post module: filter status is a parameter of no list of posts',
    ]);
    const withoutAuthor = new ResourceRegistry(resources.types().map((type) => (type === 'post' ? postWithoutAuthor : resources.get(type))));
    expect(contractDisagreements(contract, policy, withoutAuthor)).toEqual([
      'listUserPosts (GET /v1/users/{userId}/posts): expand lists [author], the post module []',
      'listPosts (GET /v1/posts): expand lists [author], the post module []',
      'getPost (GET /v1/posts/{postId}): expand lists [author], the post module []',
    ]);
  });

  it('refuse to serve a policy type without a module, or a module naming an unknown type', () => {
    // Whatever types the contract has: the registry without one of them no longer matches policy.yaml.
    const types = resources.types().sort();
    const withoutClients = new ResourceRegistry(types.filter((type) => type !== 'client').map((type) => resources.get(type)));
    expect(() => withoutClients.check(policy)).toThrow(
      `policy resource types (${types.join(', ')}) and resource modules (${types.filter((type) => type !== 'client').join(', ')}) differ`,
    );
    const strayExpansion = new ResourceRegistry(
      resources.types().map((type) => (type === 'post' ? defineResource({ ...posts, expansions: { editor: { via: 'editorId', type: 'editor' } } }) : resources.get(type))),
    );
    expect(() => strayExpansion.check(policy)).toThrow('no resource module for resource type "editor"');
  });
});

/** Records the table each statement reads from, through a Kysely plugin on the loaders' connection. */
function statementLog(): { plugin: KyselyPlugin; tables: string[] } {
  const tables: string[] = [];
  return {
    tables,
    plugin: {
      transformQuery({ node }: { node: RootOperationNode }) {
        tables.push((node as any).from?.froms?.[0]?.table?.identifier?.name ?? node.kind);
        return node;
      },
      transformResult: async ({ result }) => result,
    },
  };
}

describe.each(DATABASE_KINDS)('batched loaders on %s', (kind) => {
  let database: TestDatabase;
  const authorId = newId();
  const postIds = [newId(), newId(), newId()];

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    const db = database.db.kysely;
    const now = nowIso();
    await db.insertInto('users').values({ id: authorId, email: `${authorId}@example.com`, name: 'Author', role: 'member', active: true, passwordHash: 'x', createdAt: now, updatedAt: now }).execute();
    for (const id of postIds) await db.insertInto('posts').values({ id, authorId, title: `t ${id}`, body: 'b', status: 'published', createdAt: now, updatedAt: now }).execute();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('read the ids asked for in one tick with one statement per type, and each id once per request', async () => {
    const log = statementLog();
    // Through Kysely (no direct handle), where the plugin sees every statement.
    const loaders = new ResourceLoaders({ db: database.db.kysely.withPlugin(log.plugin), sqlite: null, resources });
    const missing = newId();
    const [first, second, absent, again, author] = await Promise.all([
      loaders.load('post', postIds[0]!),
      loaders.load('post', postIds[1]!),
      loaders.load('post', missing),
      loaders.load('post', postIds[0]!),
      loaders.load('user', authorId),
    ]);
    expect(log.tables.sort()).toEqual(['posts', 'users']);
    expect([first?.id, second?.id, absent, again]).toEqual([postIds[0], postIds[1], null, first]);
    expect(author).toEqual({ id: authorId, email: `${authorId}@example.com`, name: 'Author', role: 'member', active: true, createdAt: expect.any(String), updatedAt: expect.any(String) });

    // A load made in a callback of another load's answer joins the next batch; known ids are not read again.
    const chained = await loaders.load('post', postIds[0]!).then(() => Promise.all([loaders.load('post', postIds[2]!), loaders.load('post', postIds[1]!)]));
    expect(chained.map((row) => row?.id)).toEqual([postIds[2], postIds[1]]);
    expect(log.tables.sort()).toEqual(['posts', 'posts', 'users']);
  });

  it('fail every load of a batch whose statement fails', async () => {
    const broken = new ResourceRegistry([...resources.types().filter((t) => t !== 'post').map((t) => resources.get(t)), defineResource({ ...posts, table: { name: 'no_such_table', columns: ['id'] } })]);
    const loaders = new ResourceLoaders({ db: database.db.kysely, sqlite: database.db.sqlite, resources: broken });
    const loads = [loaders.load('post', postIds[0]!), loaders.load('post', postIds[1]!)];
    for (const load of loads) await expect(load).rejects.toThrow(/no_such_table/);
  });
});
