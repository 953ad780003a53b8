import YAML from 'yaml';
import { describe, expect, it } from 'vitest';
import { renderAccessMatrix } from '../../codegen/access-matrix.js';
import { compileContracts, readSources } from '../../codegen/compile-contracts.js';

const sources = readSources();
const matrix = (policy = sources.policy) => {
  const { routes, policy: table } = compileContracts({ ...sources, policy });
  return renderAccessMatrix(routes, table).split('\n');
};
const rowOf = (lines: string[], first: string) => lines.find((line) => line.startsWith(`| ${first} |`));

describe('generated/access.md', () => {
  it('lists every REST operation with its request, scopes, permission, the roles holding it and its per-resource rule', () => {
    const lines = matrix();
    expect(rowOf(lines, '`getPost`')).toBe('| `getPost` | `GET /v1/posts/{postId}` | `read:posts` | `read_post` | admin, editor, member | post: read (id from `postId`) |');
    expect(rowOf(lines, '`createUser`')).toBe('| `createUser` | `POST /v1/users` | `write:users` | `create_user` | admin | — |');
    expect(rowOf(lines, '`getRestContract`')).toBe('| `getRestContract` | `GET /v1/rest` | public | — | anyone, no token | — |');
    expect(rowOf(lines, '`getTokenInfo`')).toBe('| `getTokenInfo` | `GET /v1/oauth` | — | any valid token | every role | — |');
    const { routes } = compileContracts(sources);
    for (const route of routes) expect(rowOf(lines, `\`${route.operationId}\``), route.operationId).toBeDefined();
  });

  it('lists every GraphQL root field and the per-resource rules in words', () => {
    const lines = matrix();
    expect(rowOf(lines, '`Mutation.deletePost`')).toBe('| `Mutation.deletePost` | `write:posts` | `delete_post` | admin, editor, member | post: delete (id from `id`) |');
    expect(lines).toContain('| post | read | the owner (`authorId` is the caller) **or** `status` is `"published"` **or** role admin or editor |');
    expect(lines).toContain('| comment | read | whoever may read the post (`postId`) |');
    expect(lines).toContain('| user | change `role` | role admin |');
  });

  it('shows a change of policy.yaml as a change of the rows it affects, and of no other', () => {
    const policy = YAML.parse(sources.policy) as { roles: Record<string, { permissions: string[] }> };
    policy.roles.member!.permissions = policy.roles.member!.permissions.filter((permission) => permission !== 'delete_post');
    const before = matrix();
    const after = matrix(YAML.stringify(policy));
    const changed = after.filter((line, index) => line !== before[index]);
    expect(changed).toEqual([
      '| `deletePost` | `DELETE /v1/posts/{postId}` | `write:posts` | `delete_post` | admin, editor | post: delete (id from `postId`) |',
      '| `Mutation.deletePost` | `write:posts` | `delete_post` | admin, editor | post: delete (id from `id`) |',
    ]);
  });
});
