/**
 * The authorization matrix's reference: a small reading of the generated policy table that says what a
 * caller of each role should get for each target, and the arrangement of those targets through the
 * contract's own create operations. The REST matrix (matrix.test.ts) and the GraphQL one
 * (graphql-matrix.test.ts) both run from it.
 */
import fs from 'node:fs';
import YAML from 'yaml';
import { expect } from 'vitest';
import { policy } from '../../generated/policy.js';
import { routes } from '../../generated/routes.js';
import type { Action, Condition } from '../../src/policy/table.js';
import { loadResource } from '../../src/resources/load.js';
import { resources } from '../../src/resources/registry.js';
import type { RouteDefinition } from '../../src/rest/route-definition.js';
import { newId } from '../../src/storage/ids.js';
import type { TestApp, TestUser } from '../helpers/app.js';

/** Someone else's content (`others`) is a draft; `others-published` is readable by every role. */
export type Target = 'own' | 'others' | 'others-published' | 'missing' | 'none';
export type Row = Record<string, unknown>;
export interface Caller { id: string; role: string }

const contract = YAML.parse(fs.readFileSync('openapi.yaml', 'utf8'));
export const ROLES = Object.keys(policy.roles);

/**
 * The targets a route's resource type has, from its policy: one of the caller's own when the type has an
 * owner, and someone else's both hidden and visible when its read rule (or its parent's) turns on a field.
 */
export function targetsFor(route: Pick<RouteDefinition, 'access'>): Target[] {
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
export function readField(type: string): { field: string; equals: string | number | boolean } | undefined {
  return conditionsOf(policy.resources[type]!.rules.read ?? []).find((c): c is { field: string; equals: string | number | boolean } => typeof c === 'object' && 'field' in c);
}

function readsByField(type: string): boolean {
  return readField(type) !== undefined || conditionsOf(policy.resources[type]!.rules.read ?? []).some((c) => typeof c === 'object' && 'parent' in c && readsByField(c.parent));
}

/** A value of the field other than the one its read rule admits (from the contract's enum): a draft. */
export function hiddenValue(type: string, field: string, visible: unknown): unknown {
  const schema = contract.components.schemas[policy.resources[type]!.schema];
  return (schema.properties[field].enum as unknown[]).find((value) => value !== visible);
}

/** The operation that creates a resource of a type (permissions are named `<action>_<object>`). */
export function createRouteFor(type: string): RouteDefinition {
  const route = routes.find((r) => r.method === 'POST' && r.access.permission === `create_${type}`);
  if (!route) throw new Error(`no operation creates a ${type}`);
  return route;
}

/** The contract's request example, made unique where the database demands it. */
export function exampleBody(route: RouteDefinition): Row | undefined {
  const op = contract.paths[route.path][route.method.toLowerCase()];
  const example = op.requestBody?.content?.[route.bodyMediaType ?? 'application/json']?.example;
  if (!example) return undefined;
  const body: Row = structuredClone(example);
  if ('email' in body) body.email = `matrix-${newId()}@example.com`;
  delete body.clientId;
  return body;
}

// --- reference reading of the policy table ---------------------------------------------------------
export function passes(type: string, action: Action, caller: Caller, row: Row, rows: Map<string, Row>): boolean {
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

export function expectedOutcome(
  route: Pick<RouteDefinition, 'access' | 'successStatus'>,
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


/**
 * Creates the resources a case needs through the contract's own create operations, as their owner (an
 * admin for a type without an owner), under a parent of the same owner and visibility where the create
 * operation names one, and returns the target as stored plus every row by id. A type whose owner field
 * is its id is the subject itself.
 */
export async function arrange(t: TestApp, type: string | undefined, target: Target, me: TestUser, other: TestUser): Promise<{ target: Row | null; rows: Map<string, Row>; id?: string }> {
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

