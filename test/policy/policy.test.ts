import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policy } from '../../generated/policy.js';
import { decideAccess, effectivePermissions } from '../../src/policy/decide.js';
import { ANONYMOUS, type Principal } from '../../src/policy/principal.js';
import { forbiddenFieldChanges } from '../../src/policy/protected-fields.js';
import { evaluateRule } from '../../src/policy/resource-rule.js';
import { compileRuleFilter } from '../../src/policy/rule-filter.js';
import type { Action } from '../../src/policy/table.js';
import { filterToSql } from '../../src/storage/filter-sql.js';
import { resources } from '../../src/resources/registry.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

function user(role: string, subject = `u-${role}`, scopes: string[] = ['read:posts', 'write:posts']): Principal {
  return {
    kind: 'user',
    subject,
    id: subject,
    role,
    clientId: 'app',
    clientRegistrationId: 'app-registration',
    clientRateLimit: null,
    scopes: new Set(scopes),
    token: { jti: 'j', format: 'jwt', grantType: 'authorization_code', issuedAt: 0, expiresAt: 0 },
  };
}

describe('coarse decision (scope, then role)', () => {
  const getPost = policy.operations['rest:getPost']!;
  const createClient = policy.operations['rest:createClient']!;

  it('lets a public operation through for anyone', () => {
    expect(decideAccess(policy, policy.operations['rest:getRestContract']!, ANONYMOUS)).toEqual({ allowed: true, reason: 'public' });
  });

  it('asks the anonymous caller to authenticate', () => {
    expect(decideAccess(policy, getPost, ANONYMOUS)).toEqual({ allowed: false, reason: 'authentication' });
  });

  it('refuses a token without the scope before looking at the role (a read scope never reaches a write)', () => {
    expect(decideAccess(policy, policy.operations['rest:createPost']!, user('admin', 'a', ['read:posts']))).toEqual({
      allowed: false,
      reason: 'scope',
      missingScopes: ['write:posts'],
    });
  });

  it('refuses a role without the permission even with the scope', () => {
    expect(decideAccess(policy, createClient, user('editor', 'e', ['write:clients']))).toEqual({
      allowed: false,
      reason: 'role',
      permission: 'create_client',
    });
  });

  it('refuses an unknown role (default deny)', () => {
    expect(decideAccess(policy, getPost, user('intern'))).toEqual({ allowed: false, reason: 'role', permission: 'read_post' });
  });

  it('grants with scope and permission', () => {
    expect(decideAccess(policy, getPost, user('member'))).toEqual({ allowed: true, reason: 'granted' });
  });

  it('lists only the permissions usable under the token scopes', () => {
    expect(effectivePermissions(policy, 'member', new Set(['read:posts']))).toEqual(['read_post']);
    expect(effectivePermissions(policy, 'member', new Set())).toEqual([]);
  });
});

describe('protected fields', () => {
  it('refuses a member changing their own role but not their name', () => {
    const current = { id: 'm', role: 'member', active: true, name: 'M' };
    expect(forbiddenFieldChanges(policy, 'user', user('member', 'm'), current, { ...current, role: 'admin' })).toEqual(['role']);
    expect(forbiddenFieldChanges(policy, 'user', user('member', 'm'), current, { ...current, name: 'New' })).toEqual([]);
    expect(forbiddenFieldChanges(policy, 'user', user('admin'), current, { ...current, role: 'editor', active: false })).toEqual([]);
  });

  it('counts null as a change of a field that has a value (it clears it), not of one the view never shows', () => {
    // A nullable protected field of a table like this one's, say a client's role.
    const table = { ...policy, resources: { ...policy.resources, user: { ...policy.resources.user!, protectedFields: { role: ['admin'], password: ['admin'] } } } };
    const current = { id: 'm', role: 'member', name: 'M' };
    expect(forbiddenFieldChanges(table, 'user', user('member', 'm'), current, { ...current, role: null })).toEqual(['role']);
    expect(forbiddenFieldChanges(table, 'user', user('member', 'm'), current, { ...current, password: null })).toEqual([]);
    expect(forbiddenFieldChanges(table, 'user', user('member', 'm'), { ...current, role: null }, { ...current, role: null })).toEqual([]);
    expect(forbiddenFieldChanges(table, 'user', user('member', 'm'), current, { name: 'New' })).toEqual([]);
  });
});

// Every rule compiles to a predicate and to a SQL filter; they must agree on every row for every principal.
describe.each(DATABASE_KINDS)('predicate and SQL filter agree on %s', (kind) => {
  let t: TestDatabase;
  const authors = ['u-member', 'u-other', 'u-editor'];
  beforeAll(async () => {
    t = await createTestDatabase(kind);
    const now = nowIso();
    for (const authorId of authors) {
      for (const status of ['draft', 'published']) {
        const postId = newId();
        await t.db.kysely.insertInto('posts').values({ id: postId, authorId, title: 't', body: 'b', status, createdAt: now, updatedAt: now }).execute();
        for (const commenter of authors) {
          await t.db.kysely.insertInto('comments').values({ id: newId(), postId, authorId: commenter, body: 'c', createdAt: now, updatedAt: now }).execute();
        }
      }
    }
  });
  afterAll(async () => {
    await t?.drop();
  });

  const principals: [string, Principal][] = [
    ['anonymous', ANONYMOUS],
    ['member', user('member', 'u-member')],
    ['editor', user('editor', 'u-editor')],
    ['admin', user('admin', 'u-admin')],
  ];
  const cases: [string, 'posts' | 'comments', Action][] = [
    ['post', 'posts', 'read'],
    ['post', 'posts', 'update'],
    ['post', 'posts', 'delete'],
    ['comment', 'comments', 'read'],
    ['comment', 'comments', 'update'],
    ['comment', 'comments', 'delete'],
  ];

  for (const [type, table, action] of cases) {
    it.each(principals)(`${type}.${action} for %s`, async (_name, principal) => {
      const rows = (await t.db.kysely.selectFrom(table).selectAll().orderBy('id').execute()) as Record<string, unknown>[];
      const load = async (parentType: string, id: string) =>
        parentType === 'post' ? ((await t.db.kysely.selectFrom('posts').selectAll().where('id', '=', id).executeTakeFirst()) ?? null) : null;
      const byPredicate: string[] = [];
      for (const row of rows) if (await evaluateRule(policy, type, action, principal, row, load)) byPredicate.push(String(row.id));
      const filter = compileRuleFilter(policy, type, action, principal);
      const bySql = (
        await t.db.kysely
          .selectFrom(table)
          .select('id')
          .where((eb) => filterToSql(eb as never, filter, resources.tableOf))
          .orderBy('id')
          .execute()
      ).map((r) => r.id);
      expect(bySql).toEqual(byPredicate);
    });
  }

  it('lets an author change their comment only where they can read its post', async () => {
    const changeable = async (principal: Principal, action: Action) =>
      (
        await t.db.kysely
          .selectFrom('comments')
          .innerJoin('posts', 'posts.id', 'comments.postId')
          .select(['comments.authorId as commenter', 'posts.authorId as postAuthor', 'posts.status'])
          .where((eb) => filterToSql(eb as never, compileRuleFilter(policy, 'comment', action, principal), resources.tableOf, 'comments'))
          .execute()
      )
        .map((c) => `${c.commenter} on ${c.postAuthor}:${c.status}`)
        .sort();
    const own = ['u-member on u-editor:published', 'u-member on u-member:draft', 'u-member on u-member:published', 'u-member on u-other:published'];
    expect(await changeable(user('member', 'u-member'), 'update')).toEqual(own);
    expect(await changeable(user('member', 'u-member'), 'delete')).toEqual(own);
    expect((await changeable(user('editor', 'u-editor'), 'delete')).length).toBe(18);
  });

  it('gives the expected visibility: drafts only to author, editors, admins', async () => {
    const visible = async (principal: Principal) =>
      (
        await t.db.kysely
          .selectFrom('posts')
          .select(['authorId', 'status'])
          .where((eb) => filterToSql(eb as never, compileRuleFilter(policy, 'post', 'read', principal), resources.tableOf))
          .execute()
      )
        .map((p) => `${p.authorId}:${p.status}`)
        .sort();
    expect(await visible(ANONYMOUS)).toEqual(['u-editor:published', 'u-member:published', 'u-other:published']);
    expect(await visible(user('member', 'u-member'))).toEqual([
      'u-editor:published', 'u-member:draft', 'u-member:published', 'u-other:published',
    ]);
    expect((await visible(user('editor', 'u-editor'))).length).toBe(6);
  });
});
