import { deref, type OpenApiDocument } from '../../codegen/json-schema.js';
import type { PolicyTable } from '../../src/policy/table.js';
import type { ResourceRegistry } from '../../src/resources/registry.js';

const METHODS = ['get', 'post', 'put', 'delete'];
/** Query parameters every list has; the others filter it. */
const PAGING = new Set(['limit', 'page', 'after', 'expand']);

/** `#/components/schemas/Post` -> `Post`. */
function schemaName(node: unknown): string | null {
  const ref = (node as { $ref?: unknown } | undefined)?.$ref;
  return typeof ref === 'string' && ref.startsWith('#/components/schemas/') ? ref.slice('#/components/schemas/'.length) : null;
}

/**
 * Where the contract and the resource modules disagree (none: they agree). The contract declares which
 * expansions and list filters each operation accepts; the module declares how each is served:
 * - an operation serving a type (its success response is the type's schema, or a page of it) with an
 *   `expand` parameter lists exactly the module's expansions in its enum, and each expansion is a property
 *   of the schema holding the related type's schema;
 * - every query parameter of a list, beyond paging and `expand`, is a filter of the module, and every filter
 *   of a module is a query or path parameter of one of its lists.
 */
export function contractDisagreements(doc: OpenApiDocument, policy: PolicyTable, registry: ResourceRegistry): string[] {
  const problems: string[] = [];
  const typeOfSchema = new Map(Object.entries(policy.resources).map(([type, resource]) => [resource.schema, type]));
  const filtersSeen = new Map<string, Set<string>>();
  for (const [path, pathItem] of Object.entries<any>(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = pathItem[method];
      if (!op) continue;
      const where = `${op.operationId} (${method.toUpperCase()} ${path})`;
      const parameters: any[] = [...(pathItem.parameters ?? []), ...(op.parameters ?? [])].map((p) => deref(doc, p));
      const expand = parameters.find((p) => p.in === 'query' && p.name === 'expand');
      const success = Object.entries<any>(op.responses ?? {}).find(([status]) => /^2\d\d$/.test(status))?.[1];
      const body = deref(doc, success)?.content?.['application/json']?.schema;
      const direct = schemaName(body);
      const items = direct ? schemaName(deref(doc, doc.components.schemas[direct])?.properties?.data?.items) : null;
      const schema = items ?? direct;
      const type = schema ? typeOfSchema.get(schema) : undefined;
      if (type === undefined) {
        if (expand) problems.push(`${where}: has an expand parameter but serves no resource type`);
        continue;
      }
      const module = registry.get(type);
      if (expand) {
        const listed: string[] = [...(deref(doc, expand.schema)?.items?.enum ?? [])].map(String).sort();
        const declared = Object.keys(module.expansions).sort();
        if (listed.join() !== declared.join()) problems.push(`${where}: expand lists [${listed.join(', ')}], the ${type} module [${declared.join(', ')}]`);
      }
      if (items) {
        const seen = filtersSeen.get(type) ?? new Set();
        filtersSeen.set(type, seen);
        for (const p of parameters) {
          if (p.in === 'path') seen.add(p.name);
          if (p.in !== 'query' || PAGING.has(p.name)) continue;
          seen.add(p.name);
          if (!module.filters.includes(p.name)) problems.push(`${where}: query parameter ${p.name} is not a filter of the ${type} module`);
        }
      }
    }
  }
  for (const type of registry.types()) {
    const module = registry.get(type);
    const properties = deref(doc, doc.components.schemas[policy.resources[type]!.schema])?.properties ?? {};
    for (const [name, expansion] of Object.entries(module.expansions)) {
      if (schemaName(properties[name]) !== policy.resources[expansion.type]?.schema) {
        problems.push(`${type} module: expansion ${name} is not a property of ${policy.resources[type]!.schema} holding a ${expansion.type}`);
      }
    }
    for (const filter of module.filters) {
      if (!filtersSeen.get(type)?.has(filter)) problems.push(`${type} module: filter ${filter} is a parameter of no list of ${type}s`);
    }
  }
  return problems;
}
