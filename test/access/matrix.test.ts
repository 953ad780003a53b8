/**
 * The authorization matrix, derived from the generated route and policy tables rather than written per
 * operation: every operation x every role (and anonymous) x {required scopes present, absent} x {own
 * resource, someone else's draft/published, missing}. The expected status comes from a small reference
 * reading of the policy table below; adding an operation to the contract adds its rows.
 */
import fs from 'node:fs';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policy } from '../../generated/policy.js';
import { routes } from '../../generated/routes.js';
import type { Action, Condition } from '../../src/policy/table.js';
import { loadResource } from '../../src/resources/load.js';
import { resources } from '../../src/resources/registry.js';
import type { RouteDefinition } from '../../src/rest/route-definition.js';
import { newId } from '../../src/storage/ids.js';
import { ALL_API_SCOPES, startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

/** Someone else's content (`others`) is a draft; `others-published` is readable by every role. */
type Target = 'own' | 'others' | 'others-published' | 'missing' | 'none';
type Row = Record<string, unknown>;
interface Caller { id: string; role: string }

const contract = YAML.parse(fs.readFileSync('openapi.yaml', 'utf8'));
const ROLES = Object.keys(policy.roles);

/**
 * The targets a route's resource type has, from its policy: one of the caller's own when the type has an
 * owner, and someone else's both hidden and visible when its read rule (or its parent's) turns on a field.
 */
function targetsFor(route: RouteDefinition): Target[] {
  const type = route.access.resource?.type;
  if (!type) return ['none'];
  const owned: Target[] = policy.resources[type]!.owner === null ? [] : ['own'];
  const published: Target[] = readsByField(type) ? ['others-published'] : [];
  return [...owned, 'others', ...published, 'missing'];
}

function conditionsOf(conditions: readonly Condition[]): Condition[] {
  return conditions.flatMap((c) => (typeof c === 'object' && 'all' in c ? conditionsOf(c.all) : [c]));
}

/** The `{ field, equals }` condition of a type's own read rule, if it has one (a post's status). */
function readField(type: string): { field: string; equals: string | number | boolean } | undefined {
  return conditionsOf(policy.resources[type]!.rules.read ?? []).find((c): c is { field: string; equals: string | number | boolean } => typeof c === 'object' && 'field' in c);
}

function readsByField(type: string): boolean {
  return readField(type) !== undefined || conditionsOf(policy.resources[type]!.rules.read ?? []).some((c) => typeof c === 'object' && 'parent' in c && readsByField(c.parent));
}

/** A value of the field other than the one its read rule admits (from the contract's enum): a draft. */
function hiddenValue(type: string, field: string, visible: unknown): unknown {
  const schema = contract.components.schemas[policy.resources[type]!.schema];
  return (schema.properties[field].enum as unknown[]).find((value) => value !== visible);
}

/** The operation that creates a resource of a type (permissions are named `<action>_<object>`). */
function createRouteFor(type: string): RouteDefinition {
  const route = routes.find((r) => r.method === 'POST' && r.access.permission === `create_${type}`);
  if (!route) throw new Error(`no operation creates a ${type}`);
  return route;
}

/** The contract's request example, made unique where the database demands it. */
function exampleBody(route: RouteDefinition): Row | undefined {
  const op = contract.paths[route.path][route.method.toLowerCase()];
  const example = op.requestBody?.content?.['application/json']?.example;
  if (!example) return undefined;
  const body: Row = structuredClone(example);
  if ('email' in body) body.email = `matrix-${newId()}@example.com`;
  delete body.clientId;
  return body;
}

// --- reference reading of the policy table ---------------------------------------------------------
function passes(type: string, action: Action, caller: Caller, row: Row, rows: Map<string, Row>): boolean {
  const resource = policy.resources[type]!;
  const holds = (condition: Condition): boolean => {
    if (condition === 'owner') return resource.owner !== null && row[resource.owner] === caller.id;
    if ('role' in condition) return condition.role.includes(caller.role);
    if ('field' in condition) return row[condition.field] === condition.equals;
    if ('all' in condition) return condition.all.every(holds);
    const parent = rows.get(String(row[condition.via]));
    return parent !== undefined && passes(condition.parent, condition.action ?? action, caller, parent, rows);
  };
  return (resource.rules[action] ?? []).some(holds);
}

function expectedOutcome(
  route: RouteDefinition,
  caller: Caller | null,
  scopesPresent: boolean,
  target: Row | null,
  rows: Map<string, Row>,
  body: Row | undefined,
): { status: number; code?: string } {
  const access = route.access;
  if (access.public) return { status: route.successStatus };
  if (caller === null) return { status: 401, code: 'UNAUTHENTICATED' };
  if (!scopesPresent && access.scopes.length > 0) return { status: 403, code: 'INSUFFICIENT_SCOPE' };
  if (access.authenticated) return { status: route.successStatus };
  if (!policy.roles[caller.role]!.permissions.includes(access.permission!)) return { status: 403, code: 'FORBIDDEN' };
  if (access.resource) {
    if (target === null || !passes(access.resource.type, access.resource.action, caller, target, rows)) return { status: 404, code: 'NOT_FOUND' };
    const guarded = policy.resources[access.resource.type]!.protectedFields;
    for (const [field, roles] of Object.entries(guarded)) {
      if (body && field in body && body[field] !== target[field] && !roles.includes(caller.role)) return { status: 403, code: 'FORBIDDEN' };
    }
  }
  return { status: route.successStatus };
}

describe.each(DATABASE_KINDS)('authorization matrix on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' });
  });
  afterAll(async () => {
    await t?.close();
  });

  /**
   * Creates the resources a case needs through the contract's own create operations, as their owner (an
   * admin for a type without an owner), under a parent of the same owner and visibility where the create
   * operation names one, and returns the target as stored plus every row by id. A type whose owner field
   * is its id is the subject itself.
   */
  async function arrange(type: string | undefined, target: Target, me: TestUser, other: TestUser) {
    const rows = new Map<string, Row>();
    if (target === 'none') return { target: null, rows };
    if (target === 'missing') return { target: null, rows, id: newId() };
    const owner = target === 'own' ? me : other;
    const store = { db: t.database.db.kysely, sqlite: t.database.db.sqlite, resources };
    const stored = async (kind: string, id: string) => {
      const row = (await loadResource(store, kind, id))!;
      rows.set(id, row);
      return row;
    };
    const create = async (kind: string): Promise<Row> => {
      const resource = policy.resources[kind]!;
      if (resource.owner === 'id') return stored(kind, owner.id);
      const route = createRouteFor(kind);
      const parent = route.access.resource ? await create(route.access.resource.type) : null;
      const body = exampleBody(route) ?? {};
      const field = readField(kind);
      if (field) body[field.field] = target === 'others-published' ? field.equals : hiddenValue(kind, field.field, field.equals);
      const creator = resource.owner === null ? await t.createUser('admin') : owner;
      const url = route.path.replace(/\{([^}]+)\}/g, () => String(parent!.id));
      const res = await t.request({ method: 'POST', url, token: await creator.token(), body });
      expect(res.statusCode, res.body).toBe(201);
      return stored(kind, res.json().id);
    };
    const row = await create(type!);
    return { target: row, rows, id: String(row.id) };
  }

  function urlFor(route: RouteDefinition, me: TestUser, id: string | undefined): string {
    return route.path.replace(/\{([^}]+)\}/g, (_m, name: string) => (route.access.resource?.param === name ? id! : me.id));
  }

  for (const route of routes) {
    for (const role of [...ROLES, 'anonymous']) {
      for (const scopesPresent of role === 'anonymous' ? [false] : [true, false]) {
        for (const target of targetsFor(route)) {
          const label = `${route.operationId} as ${role}${role === 'anonymous' ? '' : `, scopes ${scopesPresent ? 'present' : 'absent'}`}, target ${target}`;
          it(label, async () => {
            const me = await t.createUser(role === 'anonymous' ? 'member' : (role as never));
            const other = await t.createUser('member');
            const arranged = await arrange(route.access.resource?.type, target, me, other);
            const scopes = scopesPresent ? route.access.scopes : ALL_API_SCOPES.filter((s) => !route.access.scopes.includes(s));
            const token = role === 'anonymous' ? undefined : await me.token(scopes.length > 0 ? scopes : ALL_API_SCOPES);
            const body = exampleBody(route);
            const res = await t.request({ method: route.method, url: urlFor(route, me, arranged.id), token, body });
            const caller = role === 'anonymous' ? null : { id: me.id, role };
            const expected = expectedOutcome(route, caller, scopesPresent, arranged.target, arranged.rows, body);
            expect({ status: res.statusCode, code: res.statusCode >= 400 ? res.json().error.code : undefined }, res.body).toEqual({
              status: expected.status,
              code: expected.code,
            });
          });
        }
      }
    }
  }

  // The rows above use minted tokens (TestUser.token): what the authorization code grant issues, without the
  // pages. Here each role signs in for real (authorization code + PKCE through the login page) and a sample
  // of the matrix — reads and writes, own, others' and missing resources of every type — runs with that token
  // and with a minted one: both must decide as the policy says.
  const SAMPLE = ['getAuthorization', 'listUsers', 'getUser', 'listPosts', 'createPost', 'getPost', 'replacePost', 'deletePost', 'createComment', 'getComment', 'listClients', 'getClient', 'listAuditEvents'];
  for (const role of ROLES) {
    it(`${role}: a token from a real sign-in is the minted token's twin and decides the sample alike`, async () => {
      const me = await t.createUser(role as never);
      const tokens = { 'signed in': await me.signIn(), minted: await me.token() };
      const infos = await Promise.all(Object.values(tokens).map(async (token) => (await t.request({ url: '/v1/oauth', token })).json()));
      const sameness = ({ jti: _jti, issuedAt: _issued, expiresAt: _expires, ...rest }: Row) => rest;
      expect(sameness(infos[0])).toEqual(sameness(infos[1]));
      expect(infos[0]).toMatchObject({ grantType: 'authorization_code', subject: me.id, scopes: [...ALL_API_SCOPES].sort() });
      const records = await t.database.db.kysely.selectFrom('accessTokens').select(['clientId', 'grantType', 'grantId']).where('subject', '=', me.id).execute();
      expect(records).toHaveLength(2);
      for (const record of records) expect(record).toEqual({ clientId: infos[0].clientId, grantType: 'authorization_code', grantId: expect.any(String) });

      const sample = routes.filter((r) => SAMPLE.includes(r.operationId));
      expect(sample.map((r) => r.operationId).sort()).toEqual([...SAMPLE].sort());
      const outcomes: Row[] = [];
      for (const route of sample) {
        for (const target of targetsFor(route)) {
          for (const [source, token] of Object.entries(tokens)) {
            const other = await t.createUser('member');
            const arranged = await arrange(route.access.resource?.type, target, me, other);
            const body = exampleBody(route);
            const res = await t.request({ method: route.method, url: urlFor(route, me, arranged.id), token, body });
            const expected = expectedOutcome(route, { id: me.id, role }, true, arranged.target, arranged.rows, body);
            const label = `${route.operationId}, target ${target}, ${source} token`;
            outcomes.push({ label, status: res.statusCode, code: res.statusCode >= 400 ? res.json().error.code : undefined, expected: expected.status, expectedCode: expected.code });
          }
        }
      }
      expect(outcomes.filter((o) => o.status !== o.expected || o.code !== o.expectedCode)).toEqual([]);
    });
  }
});
