import type { Action, Condition, PolicyTable, ResourcePolicy } from '../src/policy/table.js';
import { ACTIONS, type PolicySource } from './access-rule.js';
import { deref, type OpenApiDocument } from './json-schema.js';
import type { Problems } from './problems.js';

const FILE = 'policy.yaml';

/** Validates policy.yaml against itself and the contract's schemas, and normalises its resources. */
export function compileResources(raw: PolicySource, doc: OpenApiDocument, problems: Problems): PolicyTable['resources'] {
  for (const [role, def] of Object.entries(raw.roles ?? {})) {
    for (const permission of def.permissions ?? []) {
      if (!(permission in (raw.permissions ?? {}))) problems.add(FILE, `roles.${role}`, `permission "${permission}" is not declared`);
    }
  }
  const roleNames = Object.keys(raw.roles ?? {});
  const resources: PolicyTable['resources'] = {};
  for (const [type, def] of Object.entries(raw.resources ?? {})) {
    const where = `resources.${type}`;
    const schema = deref(doc, doc.components?.schemas?.[def.schema]);
    const fields = new Set(Object.keys(schema?.properties ?? {}));
    if (!schema) problems.add(FILE, where, `schema "${def.schema}" is not in openapi.yaml components.schemas`);
    const checkField = (field: string, at: string) => {
      if (schema && !fields.has(field)) problems.add(FILE, at, `field "${field}" is not a property of ${def.schema}`);
    };
    if (def.owner) checkField(def.owner, `${where}.owner`);
    const rules: ResourcePolicy['rules'] = {};
    for (const [action, conditions] of Object.entries(def.rules ?? {})) {
      if (!ACTIONS.includes(action as Action)) problems.add(FILE, `${where}.rules.${action}`, 'unknown action');
      if (!Array.isArray(conditions) || conditions.length === 0) {
        problems.add(FILE, `${where}.rules.${action}`, 'must be a non-empty list of conditions');
        continue;
      }
      rules[action as keyof ResourcePolicy['rules']] = conditions.map((c, i) =>
        checkCondition(c, `${where}.rules.${action}[${i}]`, def.owner ?? null, roleNames, raw, checkField, problems),
      );
    }
    const protectedFields: Record<string, string[]> = {};
    const writable = writableFields(doc, type);
    for (const [field, roles] of Object.entries(def.protectedFields ?? {})) {
      if (!writable.has(field)) {
        problems.add(FILE, `${where}.protectedFields.${field}`, `field "${field}" is not in the request body of any operation on ${type}`);
      }
      for (const role of roles) if (!roleNames.includes(role)) problems.add(FILE, `${where}.protectedFields.${field}`, `unknown role "${role}"`);
      protectedFields[field] = roles;
    }
    resources[type] = { schema: def.schema, owner: def.owner ?? null, rules, protectedFields };
  }
  return resources;
}

function checkCondition(
  condition: unknown,
  where: string,
  owner: string | null,
  roleNames: string[],
  raw: PolicySource,
  checkField: (field: string, at: string) => void,
  problems: Problems,
): Condition {
  if (condition === 'owner') {
    if (!owner) problems.add(FILE, where, '"owner" needs the resource to declare an owner field');
    return 'owner';
  }
  if (condition && typeof condition === 'object') {
    const c = condition as Record<string, unknown>;
    if (typeof c.field === 'string' && 'equals' in c && Object.keys(c).length === 2) {
      checkField(c.field, where);
      return { field: c.field, equals: c.equals as string | number | boolean };
    }
    if (Array.isArray(c.role) && Object.keys(c).length === 1) {
      for (const role of c.role) if (!roleNames.includes(String(role))) problems.add(FILE, where, `unknown role "${String(role)}"`);
      return { role: c.role.map(String) };
    }
    const parentKeys = Object.keys(c).filter((key) => key !== 'action');
    if (typeof c.parent === 'string' && typeof c.via === 'string' && parentKeys.length === 2) {
      if (!raw.resources?.[c.parent]) problems.add(FILE, where, `parent resource "${c.parent}" is not declared`);
      checkField(c.via, where);
      if (c.action === undefined) return { parent: c.parent, via: c.via };
      if (!ACTIONS.includes(c.action as Action)) problems.add(FILE, where, `unknown action "${String(c.action)}" (use ${ACTIONS.join(', ')})`);
      return { parent: c.parent, via: c.via, action: c.action as Action };
    }
    if (Array.isArray(c.all) && Object.keys(c).length === 1) {
      if (c.all.length < 2) problems.add(FILE, where, '"all" needs at least two conditions');
      return { all: c.all.map((part, i) => checkCondition(part, `${where}.all[${i}]`, owner, roleNames, raw, checkField, problems)) };
    }
  }
  problems.add(FILE, where, `unknown condition ${JSON.stringify(condition)} (use owner, {field, equals}, {role}, {parent, via[, action]}, {all: [...]})`);
  return { role: [] };
}

/** Properties of the request bodies of the operations that act on one resource of this type. */
function writableFields(doc: OpenApiDocument, type: string): Set<string> {
  const fields = new Set<string>();
  for (const pathItem of Object.values<any>(doc.paths ?? {})) {
    for (const op of Object.values<any>(pathItem)) {
      if (op?.['x-resource']?.type !== type || !op.requestBody) continue;
      for (const media of Object.values<any>(deref(doc, op.requestBody).content ?? {})) {
        const schema = deref(doc, media?.schema);
        for (const name of Object.keys(schema?.properties ?? {})) fields.add(name);
      }
    }
  }
  return fields;
}
