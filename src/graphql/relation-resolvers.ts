import { getNamedType, isObjectType, type GraphQLNamedType, type GraphQLSchema } from 'graphql';

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
      if (field.resolve === undefined && leadsToResource(getNamedType(field.type))) missing.push(`${type.name}.${field.name}`);
    }
  }
  return missing;
}

function leadsToResource(type: GraphQLNamedType): boolean {
  if (!isObjectType(type)) return false;
  if (carriesAuth(type)) return true;
  const nodes = type.getFields().nodes;
  return nodes !== undefined && carriesAuth(getNamedType(nodes.type));
}

function carriesAuth(type: GraphQLNamedType): boolean {
  return type.astNode?.directives?.some((directive) => directive.name.value === 'auth') ?? false;
}
