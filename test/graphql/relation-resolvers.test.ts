import { buildSchema, type GraphQLObjectType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { fieldsMissingResolvers } from '../../src/graphql/relation-resolvers.js';

const SDL = `
directive @auth(scopes: [String!]!, permission: String, resource: String) on FIELD_DEFINITION | OBJECT
type User @auth(scopes: ["read:users"], resource: "user") { id: ID!, name: String!, jottings(first: Int!): JottingConnection, address: Address }
type Address { city: String }
type Jotting @auth(scopes: ["read:jottings"], resource: "jotting") { id: ID!, text: String!, author: User, authorId: ID! }
type JottingConnection { nodes: [Jotting!]! }
type Query { jotting(id: ID!): Jotting @auth(scopes: ["read:jottings"]) }
`;

describe('fields of a resource type that lead to another resource', () => {
  it('are named when they have no resolver: a resource or a connection of them, not a scalar or a plain object', () => {
    const schema = buildSchema(SDL);
    expect(fieldsMissingResolvers(schema)).toEqual(['User.jottings', 'Jotting.author']);
    // With a resolver, a field is no longer named.
    (schema.getType('Jotting') as GraphQLObjectType).getFields().author!.resolve = () => null;
    expect(fieldsMissingResolvers(schema)).toEqual(['User.jottings']);
  });

  it('see through interfaces, unions, Relay edges and @auth given by an extension', () => {
    const schema = buildSchema(`
      directive @auth(scopes: [String!]!, permission: String, resource: String) on FIELD_DEFINITION | OBJECT
      type User @auth(scopes: ["read:users"], resource: "user") { id: ID!, pinned: Pinnable, found: Found, followers: UserEdges }
      interface Pinnable { id: ID! }
      type Jotting implements Pinnable { id: ID! }
      extend type Jotting @auth(scopes: ["read:jottings"], resource: "jotting")
      type Label { text: String }
      union Found = Jotting | Label
      type UserEdges { edges: [UserEdge!]! }
      type UserEdge { node: User! }
      type Query { me: User @auth(scopes: ["read:users"]) }
    `);
    expect(fieldsMissingResolvers(schema)).toEqual(['User.pinned', 'User.found', 'User.followers']);
  });
});
