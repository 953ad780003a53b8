/**
 * The authorization matrix through GraphQL: every root field of schema.graphql x every role (and
 * anonymous) x {required scopes present, absent} x {own, someone else's draft/published, missing}, expected
 * from the same reference reading of the policy table as the REST matrix. The same decision appears in
 * GraphQL's shape: anonymous on a protected field is a 401 with no data; a refused field is null with the
 * REST error's code in `errors[].extensions.code` (200, or the REST status when the field is non-null and
 * so the whole data is null).
 */
import fs from 'node:fs';
import { buildSchema, getNamedType, isNonNullType, isObjectType, type GraphQLField } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policy } from '../../generated/policy.js';
import { routes } from '../../generated/routes.js';
import type { OperationAccess } from '../../src/policy/table.js';
import { ALL_API_SCOPES, startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { arrange, exampleBody, expectedOutcome, ROLES, targetsFor } from './matrix-support.js';

const schema = buildSchema(fs.readFileSync('schema.graphql', 'utf8'));

/** The REST operation each root field runs (the same handler): its example body is the field's input. */
const REST_TWIN: Record<string, string | null> = {
  'Query.me': null,
  'Query.user': 'getUser',
  'Query.users': 'listUsers',
  'Query.post': 'getPost',
  'Query.posts': 'listPosts',
  'Query.comment': 'getComment',
  'Mutation.createUser': 'createUser',
  'Mutation.replaceUser': 'replaceUser',
  'Mutation.deleteUser': 'deleteUser',
  'Mutation.createPost': 'createPost',
  'Mutation.replacePost': 'replacePost',
  'Mutation.deletePost': 'deletePost',
  'Mutation.createComment': 'createComment',
  'Mutation.replaceComment': 'replaceComment',
  'Mutation.deleteComment': 'deleteComment',
};

interface FieldCase {
  name: string;
  access: OperationAccess;
  nullable: boolean;
  /** The document, with `$id` for the resource's id where the field takes one. */
  document(id: string | undefined): { query: string; variables: Record<string, unknown> };
}

function fieldCases(): FieldCase[] {
  const cases: FieldCase[] = [];
  for (const [rootName, root] of [['Query', schema.getQueryType()!], ['Mutation', schema.getMutationType()!]] as const) {
    for (const field of Object.values(root.getFields()) as GraphQLField<unknown, unknown>[]) {
      const name = `${rootName}.${field.name}`;
      if (!(name in REST_TWIN)) throw new Error(`${name}: add it to REST_TWIN`);
      const twin = REST_TWIN[name] ? routes.find((route) => route.operationId === REST_TWIN[name])! : null;
      let access = policy.operations[`graphql:${name}`]!;
      // A field whose rule names no resource checks its REST twin's (createComment: the post it comments on).
      if (access.resource === null && twin?.access.resource && field.args.some((arg) => arg.name === twin.access.resource!.param)) {
        access = { ...access, resource: twin.access.resource };
      }
      const type = getNamedType(field.type);
      const selection = isObjectType(type) ? ('nodes' in type.getFields() ? ' { nodes { id } }' : ' { id }') : '';
      cases.push({
        name,
        access,
        nullable: !isNonNullType(field.type),
        document(id) {
          const declared: string[] = [];
          const passed: string[] = [];
          const variables: Record<string, unknown> = {};
          for (const arg of field.args) {
            if (arg.name === access.resource?.param) {
              declared.push(`$${arg.name}: ID!`);
              passed.push(`${arg.name}: $${arg.name}`);
              variables[arg.name] = id;
            } else if (arg.name === 'first') passed.push('first: 1');
            else if (arg.name === 'input') {
              declared.push(`$input: ${String(arg.type)}`);
              passed.push('input: $input');
              variables.input = exampleBody(twin!);
            } else if (isNonNullType(arg.type)) throw new Error(`${name}: no value for its argument ${arg.name}`);
          }
          const operation = rootName === 'Query' ? 'query' : 'mutation';
          const args = passed.length > 0 ? `(${passed.join(', ')})` : '';
          const vars = declared.length > 0 ? `(${declared.join(', ')})` : '';
          return { query: `${operation} ${vars} { ${field.name}${args}${selection} }`, variables };
        },
      });
    }
  }
  return cases;
}

describe.each(DATABASE_KINDS)('authorization matrix through GraphQL on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('covers every root field of schema.graphql', () => {
    const served = Object.keys(policy.operations).filter((id) => id.startsWith('graphql:Query.') || id.startsWith('graphql:Mutation.'));
    expect(fieldCases().map((c) => `graphql:${c.name}`).sort()).toEqual(served.sort());
  });

  for (const field of fieldCases()) {
    for (const role of [...ROLES, 'anonymous']) {
      for (const scopesPresent of role === 'anonymous' ? [false] : [true, false]) {
        for (const target of targetsFor(field)) {
          const label = `${field.name} as ${role}${role === 'anonymous' ? '' : `, scopes ${scopesPresent ? 'present' : 'absent'}`}, target ${target}`;
          it(label, async () => {
            const me = await t.createUser(role === 'anonymous' ? 'member' : (role as never));
            const other = await t.createUser('member');
            const arranged = await arrange(t, field.access.resource?.type, target, me, other);
            const scopes = scopesPresent ? field.access.scopes : ALL_API_SCOPES.filter((s) => !field.access.scopes.includes(s));
            const token = role === 'anonymous' ? undefined : await me.token(scopes.length > 0 ? scopes : ALL_API_SCOPES);
            const { query, variables } = field.document(arranged.id);
            const res = await t.request({ method: 'POST', url: '/graphql', token, body: { query, variables } });
            const caller = role === 'anonymous' ? null : { id: me.id, role };
            const rest = expectedOutcome({ access: field.access, successStatus: 200 }, caller, scopesPresent, arranged.target, arranged.rows, variables.input as never);
            const body = res.json();
            const expected =
              rest.code === undefined
                ? { status: 200, code: undefined, data: true }
                : rest.code === 'UNAUTHENTICATED'
                  ? { status: 401, code: rest.code, data: false }
                  : { status: field.nullable ? 200 : rest.status, code: rest.code, data: field.nullable };
            expect({ status: res.statusCode, code: body.errors?.[0]?.extensions?.code, data: body.data !== undefined && body.data !== null }, res.body).toEqual(expected);
            if (expected.code !== undefined && expected.code !== 'UNAUTHENTICATED') expect(body.errors[0].path).toEqual([field.name.split('.')[1]]);
          });
        }
      }
    }
  }
});
