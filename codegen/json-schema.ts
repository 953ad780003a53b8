import type { JsonSchema } from '../src/rest/route-definition.js';

export type OpenApiDocument = Record<string, any>;

/** Follows a local `#/...` JSON pointer. */
export function resolvePointer(doc: OpenApiDocument, ref: string): any {
  if (!ref.startsWith('#/')) throw new Error(`only local references are supported: ${ref}`);
  return ref
    .slice(2)
    .split('/')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((node: any, key) => (node === undefined ? undefined : node[key]), doc);
}

/** Replaces a node that is a `$ref` by its target (one level). */
export function deref<T = any>(doc: OpenApiDocument, node: any): T {
  let current = node;
  for (let hops = 0; current && typeof current === 'object' && typeof current.$ref === 'string'; hops++) {
    if (hops > 20) throw new Error(`reference loop at ${String(node.$ref)}`);
    current = resolvePointer(doc, current.$ref);
  }
  return current as T;
}

// OpenAPI-only annotations that are not JSON Schema keywords; ajv's strict mode rejects them.
const OPENAPI_ONLY = new Set(['example', 'xml', 'externalDocs', 'discriminator']);

/**
 * A self-contained JSON Schema for the runtime: references inlined, OpenAPI-only and `x-` keys dropped.
 * The sample contract has no recursive schemas; a cycle is reported instead of looping.
 */
export function toRuntimeSchema(doc: OpenApiDocument, node: any, seen: string[] = []): JsonSchema {
  if (Array.isArray(node)) return node.map((item) => toRuntimeSchema(doc, item, seen)) as unknown as JsonSchema;
  if (!node || typeof node !== 'object') return node;
  if (typeof node.$ref === 'string') {
    if (seen.includes(node.$ref)) throw new Error(`recursive schema ${node.$ref} is not supported`);
    const { $ref, ...siblings } = node;
    const target = toRuntimeSchema(doc, resolvePointer(doc, $ref), [...seen, $ref]);
    return Object.keys(siblings).length === 0 ? target : { ...target, ...toRuntimeSchema(doc, siblings, seen) };
  }
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (OPENAPI_ONLY.has(key) || key.startsWith('x-')) continue;
    // `properties` maps names to schemas: a property may be called `example` or `x-...` legitimately.
    if (key === 'properties' && value && typeof value === 'object') {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, toRuntimeSchema(doc, schema, seen)]));
    } else {
      out[key] = toRuntimeSchema(doc, value, seen);
    }
  }
  return out;
}
