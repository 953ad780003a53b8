import { CriticalityLevel, diff, type Change } from '@graphql-inspector/core';
import type { GraphQLSchema } from 'graphql';
import type { JsonSchema, RouteDefinition } from '../src/rest/route-definition.js';
import type { OperationAccess } from '../src/policy/table.js';
import type { CompiledContracts } from './compile-contracts.js';

/**
 * What changed between the released contract and this one, as a client generated from the released one
 * sees it. `breaking` fails `npm run contract:check`; `access` is a weaker access rule, reported for the
 * reviewer; `retired` is a removal the released contract announced (deprecated, Sunset passed).
 */
export interface ContractChange {
  kind: 'breaking' | 'access' | 'retired';
  /** `GET /v1/posts (listPosts)`, `Query.post`, ... */
  where: string;
  message: string;
}

export interface ContractVersion {
  compiled: CompiledContracts;
  schema: GraphQLSchema;
}

/** The Sunset date a GraphQL deprecation reason names (`... Sunset: 2027-01-01`), in ms, or null. */
function graphqlSunset(reason: string | null | undefined): number | null {
  const match = /Sunset:?\s*(\d{4}-\d\d-\d\d)/i.exec(reason ?? '');
  return match ? Date.parse(match[1]!) : null;
}

/** Compares two versions of the contracts (REST and GraphQL) as of `now`. */
export async function diffContracts(released: ContractVersion, current: ContractVersion, now = Date.now()): Promise<ContractChange[]> {
  return [...diffRest(released.compiled, current.compiled, now), ...(await diffGraphql(released, current, now))];
}

// --- REST ---------------------------------------------------------------------------------------------

function describe(route: RouteDefinition): string {
  return `${route.method} ${route.path} (${route.operationId})`;
}

function sunsetPassed(route: RouteDefinition, now: number): boolean {
  const sunset = route.deprecationHeaders.sunset;
  return route.deprecated && sunset !== undefined && Date.parse(sunset) <= now;
}

function diffRest(released: CompiledContracts, current: CompiledContracts, now: number): ContractChange[] {
  const changes: ContractChange[] = [];
  const currentById = new Map(current.routes.map((route) => [route.operationId, route]));
  const resolve = (contracts: CompiledContracts) => (schema: JsonSchema | undefined) => resolveShared(contracts, schema);
  for (const old of released.routes) {
    const where = describe(old);
    const now_ = currentById.get(old.operationId);
    if (!now_) {
      if (sunsetPassed(old, now)) changes.push({ kind: 'retired', where, message: 'removed after its Sunset date' });
      else changes.push({ kind: 'breaking', where, message: 'operation removed or renamed' + (old.deprecated ? ' before its Sunset date' : ' (deprecate it first, with a Sunset date)') });
      continue;
    }
    const add = (message: string) => changes.push({ kind: 'breaking', where, message });
    if (now_.method !== old.method || now_.path !== old.path) add(`moved to ${now_.method} ${now_.path}`);
    for (const part of ['params', 'querystring', 'headers'] as const) {
      compareInput(`${part}`, old.schema[part], now_.schema[part], add, true);
    }
    if (old.schema.body || now_.schema.body) compareInput('body', old.schema.body, now_.schema.body, add, false);
    if (old.bodyMediaType !== null && now_.bodyMediaType !== old.bodyMediaType) add(`request body media type ${old.bodyMediaType} -> ${now_.bodyMediaType ?? 'none'}`);
    for (const [status, schema] of Object.entries(old.schema.response)) {
      if (!/^2/.test(status)) continue;
      const after = now_.schema.response[status];
      if (!after) add(`response ${status} removed`);
      else compareOutput(`response ${status}`, resolve(released)(schema), resolve(current)(after), add);
    }
    if (old.successStatus !== now_.successStatus) add(`success status ${old.successStatus} -> ${now_.successStatus}`);
    compareAccess(where, old.access, now_.access, changes);
  }
  return changes;
}

/** A route's response schema with a shared one (`{ $ref: 'Error#' }`) replaced by its definition. */
function resolveShared(contracts: CompiledContracts, schema: JsonSchema | undefined): JsonSchema | undefined {
  const ref = schema?.$ref;
  if (typeof ref !== 'string') return schema;
  return contracts.sharedSchemas.find((shared) => `${String(shared.$id)}#` === ref) ?? schema;
}

type Report = (message: string) => void;

function typesOf(schema: JsonSchema): Set<string> | null {
  const type = schema.type;
  if (type === undefined) return null;
  return new Set(Array.isArray(type) ? (type as string[]) : [type as string]);
}

function propertiesOf(schema: JsonSchema | undefined): Record<string, JsonSchema> {
  return (schema?.properties as Record<string, JsonSchema> | undefined) ?? {};
}

function requiredOf(schema: JsonSchema | undefined): Set<string> {
  return new Set((schema?.required as string[] | undefined) ?? []);
}

/**
 * A request part or body, as what a client sends: a field (or parameter) removed, a new required one, or a
 * narrower value (fewer types or enum values, a smaller maximum, a larger minimum, a new or changed pattern
 * or format) refuses what the released contract accepted.
 */
function compareInput(at: string, old: JsonSchema | undefined, now: JsonSchema | undefined, report: Report, parameters: boolean): void {
  if (!old && !now) return;
  if (!now) {
    report(`${at}: no longer taken`);
    return;
  }
  const oldProps = propertiesOf(old);
  const nowProps = propertiesOf(now);
  for (const name of Object.keys(oldProps)) {
    if (!(name in nowProps)) report(`${at}/${name}: ${parameters ? 'parameter' : 'field'} removed`);
  }
  const wasRequired = requiredOf(old);
  for (const name of requiredOf(now)) {
    if (!wasRequired.has(name)) report(`${at}/${name}: new required ${parameters ? 'parameter' : 'field'}`);
  }
  if (old) narrowed(at, old, now, report);
  for (const [name, schema] of Object.entries(oldProps)) {
    const after = nowProps[name];
    if (after) compareInput(`${at}/${name}`, schema, after, report, false);
  }
  if (old?.items && now.items) compareInput(`${at}/items`, old.items as JsonSchema, now.items as JsonSchema, report, false);
}

function narrowed(at: string, old: JsonSchema, now: JsonSchema, report: Report): void {
  const oldTypes = typesOf(old);
  const nowTypes = typesOf(now);
  if (oldTypes && nowTypes) {
    const lost = [...oldTypes].filter((type) => !nowTypes.has(type) && !(type === 'integer' && nowTypes.has('number')));
    if (lost.length > 0) report(`${at}: no longer takes ${lost.join(', ')}`);
  }
  const oldEnum = old.enum as unknown[] | undefined;
  const nowEnum = now.enum as unknown[] | undefined;
  if (nowEnum) {
    const lost = oldEnum ? oldEnum.filter((value) => !nowEnum.includes(value)) : null;
    if (lost === null) report(`${at}: now limited to ${nowEnum.map(String).join(', ')}`);
    else if (lost.length > 0) report(`${at}: enum value ${lost.map(String).join(', ')} removed`);
  }
  for (const key of ['maxLength', 'maximum', 'exclusiveMaximum', 'maxItems', 'maxProperties']) {
    const before = old[key] as number | undefined;
    const after = now[key] as number | undefined;
    if (after !== undefined && (before === undefined || after < before)) report(`${at}: ${key} ${before ?? 'none'} -> ${after}`);
  }
  for (const key of ['minLength', 'minimum', 'exclusiveMinimum', 'minItems', 'minProperties']) {
    const before = old[key] as number | undefined;
    const after = now[key] as number | undefined;
    if (after !== undefined && (before === undefined || after > before)) report(`${at}: ${key} ${before ?? 'none'} -> ${after}`);
  }
  for (const key of ['pattern', 'format', 'const']) {
    if (now[key] !== undefined && now[key] !== old[key]) report(`${at}: ${key} ${JSON.stringify(old[key] ?? null)} -> ${JSON.stringify(now[key])}`);
  }
  if (old.additionalProperties !== false && now.additionalProperties === false) report(`${at}: no longer takes other fields`);
}

/**
 * A response body, as what a client reads: a field removed or no longer always there, an enum value
 * removed, or a value of a type the released contract never sent.
 */
function compareOutput(at: string, old: JsonSchema | undefined, now: JsonSchema | undefined, report: Report): void {
  if (!old || !now) return;
  const oldProps = propertiesOf(old);
  const nowProps = propertiesOf(now);
  const nowRequired = requiredOf(now);
  for (const name of Object.keys(oldProps)) {
    if (!(name in nowProps)) report(`${at}/${name}: field removed`);
  }
  for (const name of requiredOf(old)) {
    if (name in nowProps && !nowRequired.has(name)) report(`${at}/${name}: no longer always present`);
  }
  const oldTypes = typesOf(old);
  const nowTypes = typesOf(now);
  if (oldTypes && nowTypes) {
    const added = [...nowTypes].filter((type) => !oldTypes.has(type) && !(type === 'integer' && oldTypes.has('number')));
    if (added.length > 0) report(`${at}: may now be ${added.join(', ')}`);
  }
  const oldEnum = old.enum as unknown[] | undefined;
  const nowEnum = now.enum as unknown[] | undefined;
  if (oldEnum && nowEnum) {
    const lost = oldEnum.filter((value) => !nowEnum.includes(value));
    if (lost.length > 0) report(`${at}: enum value ${lost.map(String).join(', ')} removed`);
  }
  for (const [name, schema] of Object.entries(oldProps)) compareOutput(`${at}/${name}`, schema, nowProps[name], report);
  if (old.items && now.items) compareOutput(`${at}/items`, old.items as JsonSchema, now.items as JsonSchema, report);
}

/**
 * A scope added to an operation breaks the tokens clients hold; a rule that lets more callers in (a scope
 * or the permission dropped, the per-resource check gone, made public) is reported for the reviewer.
 */
function compareAccess(where: string, old: OperationAccess, now: OperationAccess, changes: ContractChange[]): void {
  const added = now.scopes.filter((scope) => !old.scopes.includes(scope));
  if (added.length > 0) changes.push({ kind: 'breaking', where, message: `scope ${added.join(', ')} added: tokens issued for it no longer suffice` });
  const weaker: string[] = [];
  const dropped = old.scopes.filter((scope) => !now.scopes.includes(scope));
  if (dropped.length > 0) weaker.push(`scope ${dropped.join(', ')} no longer needed`);
  if (old.permission !== now.permission) weaker.push(`permission ${old.permission ?? 'none'} -> ${now.permission ?? 'none'}`);
  if (old.resource && !now.resource) weaker.push('per-resource check removed');
  if (old.resource && now.resource && old.resource.action !== now.resource.action) weaker.push(`resource rule ${old.resource.action} -> ${now.resource.action}`);
  if (!old.public && now.public) weaker.push('now public');
  if (!old.authenticated && now.authenticated && !old.public) weaker.push('any valid token now suffices');
  for (const message of weaker) changes.push({ kind: 'access', where, message });
}

// --- GraphQL ------------------------------------------------------------------------------------------

async function diffGraphql(released: ContractVersion, current: ContractVersion, now: number): Promise<ContractChange[]> {
  const changes: ContractChange[] = [];
  for (const change of await diff(released.schema, current.schema)) {
    if (change.criticality.level !== CriticalityLevel.Breaking) continue;
    const where = change.path ?? 'schema.graphql';
    if (retiredField(released.schema, change, now)) changes.push({ kind: 'retired', where, message: `${change.message} (after its Sunset date)` });
    else changes.push({ kind: 'breaking', where, message: change.message });
  }
  const oldFields = graphqlAccess(released.compiled);
  for (const [field, access] of graphqlAccess(current.compiled)) {
    const old = oldFields.get(field);
    if (old) compareAccess(field, old, access, changes);
  }
  return changes;
}

function graphqlAccess(compiled: CompiledContracts): Map<string, OperationAccess> {
  return new Map(
    Object.entries(compiled.policy.operations)
      .filter(([id]) => id.startsWith('graphql:'))
      .map(([id, access]) => [id.slice('graphql:'.length), access]),
  );
}

/** A field removed that the released schema deprecated with a Sunset date now past. */
function retiredField(schema: GraphQLSchema, change: Change, now: number): boolean {
  if (change.type !== 'FIELD_REMOVED' || !change.path) return false;
  const [typeName, fieldName] = change.path.split('.');
  const type = schema.getType(typeName!) as { getFields?: () => Record<string, { deprecationReason?: string | null }> } | undefined;
  const field = type?.getFields?.()[fieldName!];
  const sunset = graphqlSunset(field?.deprecationReason);
  return sunset !== null && sunset <= now;
}
