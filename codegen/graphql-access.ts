import {
  isObjectType,
  valueFromASTUntyped,
  type ConstDirectiveNode,
  type GraphQLField,
  type GraphQLSchema,
} from 'graphql';
import type { OperationAccess, PolicyTable } from '../src/policy/table.js';
import { checkAccess, type PolicySource } from './access-rule.js';
import type { Problems } from './problems.js';

const FILE = 'schema.graphql';

function directiveArgs(directive: ConstDirectiveNode | undefined): Record<string, unknown> | null {
  if (!directive) return null;
  return Object.fromEntries((directive.arguments ?? []).map((a) => [a.name.value, valueFromASTUntyped(a.value)]));
}

function findDirective(nodes: readonly { directives?: readonly ConstDirectiveNode[] }[], name: string) {
  for (const node of nodes) {
    const found = node.directives?.find((d) => d.name.value === name);
    if (found) return found;
  }
  return undefined;
}

/** Reads @auth / @public from every root field and every object type of schema.graphql. */
export function compileGraphqlAccess(
  schema: GraphQLSchema,
  scopes: Record<string, string>,
  policy: PolicySource,
  problems: Problems,
): { operations: Record<string, OperationAccess>; types: PolicyTable['graphqlTypes'] } {
  const operations: Record<string, OperationAccess> = {};
  const roots = [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()];
  for (const root of roots) {
    if (!root) continue;
    for (const field of Object.values(root.getFields()) as GraphQLField<unknown, unknown>[]) {
      const where = `${root.name}.${field.name}`;
      const node = field.astNode;
      const auth = directiveArgs(findDirective(node ? [node] : [], 'auth'));
      const isPublic = !!findDirective(node ? [node] : [], 'public');
      if (!auth && !isPublic) {
        problems.add(FILE, where, 'has no access rule (@auth or @public)');
        continue;
      }
      const resource = typeof auth?.resource === 'string' ? { type: auth.resource, param: 'id' } : undefined;
      const permission = auth?.permission;
      operations[`graphql:${where}`] = checkAccess(
        { file: FILE, where, scopes, policy, problems, idParams: field.args.map((a) => a.name) },
        `graphql:${where}`,
        {
          public: isPublic,
          scopes: isPublic ? [] : auth?.scopes,
          permission,
          resource,
          deprecated: field.deprecationReason != null,
        },
      );
    }
  }

  const types: PolicyTable['graphqlTypes'] = {};
  for (const type of Object.values(schema.getTypeMap())) {
    if (!isObjectType(type) || type.name.startsWith('__') || roots.includes(type)) continue;
    const nodes = [type.astNode, ...(type.extensionASTNodes ?? [])].filter((n) => n !== null && n !== undefined);
    const auth = directiveArgs(findDirective(nodes, 'auth'));
    if (!auth) continue;
    const where = `type ${type.name}`;
    const checked = checkAccess({ file: FILE, where, scopes, policy, problems, idParams: ['id'] }, `graphql:${type.name}`, {
      scopes: auth.scopes,
      permission: auth.permission,
      resource: typeof auth.resource === 'string' ? { type: auth.resource, param: 'id', action: 'read' } : undefined,
    });
    types[type.name] = { scopes: checked.scopes, permission: checked.permission, resource: checked.resource?.type ?? null };
  }
  return { operations, types };
}
