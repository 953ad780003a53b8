import { getNamedType, isAbstractType, isObjectType, type GraphQLNamedType, type GraphQLSchema } from 'graphql';

/**
 * A field of a resource type that leads to another resource (`Post.author: User`) or to a connection of them
 * (`User.posts: PostConnection`) must have a resolver: the representation an object is built from holds the
 * related resource's id, not the resource, so without one the field would be null on every request, silently,
 * and nothing would check the related object's read rule. The server refuses to start instead, naming each
 * such field. Root types are left out: their fields are checked against the contract elsewhere.
 */
export function fieldsMissingResolvers(schema: GraphQLSchema): string[] {
  const roots = new Set([schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()]);
  const missing: string[] = [];
  for (const type of Object.values(schema.getTypeMap())) {
    // A resource type's fields; a connection holds the nodes it was resolved with.
    if (!isObjectType(type) || roots.has(type) || !carriesAuth(type)) continue;
    for (const field of Object.values(type.getFields())) {
      if (field.resolve === undefined && leadsToResource(schema, getNamedType(field.type))) missing.push(`${type.name}.${field.name}`);
    }
  }
  return missing;
}

function leadsToResource(schema: GraphQLSchema, type: GraphQLNamedType): boolean {
  // An interface or union leads to a resource when one of the types it stands for is one.
  if (isAbstractType(type)) return schema.getPossibleTypes(type).some((possible) => leadsToResource(schema, possible));
  if (!isObjectType(type)) return false;
  if (carriesAuth(type)) return true;
  // A connection: its `nodes`, or its `edges`' `node` (Relay's shape).
  const fields = type.getFields();
  if (fields.nodes !== undefined && leadsToResource(schema, getNamedType(fields.nodes.type))) return true;
  const edge = fields.edges === undefined ? undefined : getNamedType(fields.edges.type);
  const node = edge !== undefined && isObjectType(edge) ? edge.getFields().node : undefined;
  return node !== undefined && leadsToResource(schema, getNamedType(node.type));
}

/** Whether the type carries @auth, on its definition or on an `extend type`. */
function carriesAuth(type: GraphQLNamedType): boolean {
  return [type.astNode, ...type.extensionASTNodes].some((node) => node?.directives?.some((directive) => directive.name.value === 'auth') ?? false);
}
