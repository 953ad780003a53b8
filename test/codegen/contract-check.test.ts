import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildSchema } from 'graphql';
import YAML from 'yaml';
import { describe, expect, it } from 'vitest';
import { compileContracts, readSources } from '../../codegen/compile-contracts.js';
import { diffContracts, type ContractChange } from '../../codegen/contract-diff.js';

// The breaking-change gate (`npm run contract:check`), fed one example of each kind of change.

const released = readSources();
const sdl = fs.readFileSync('schema.graphql', 'utf8');
const NOW = Date.parse('2027-06-01T00:00:00Z');

async function changesOf(edit: { openapi?: (doc: any) => void; sdl?: (text: string) => string; before?: (doc: any) => void; sdlBefore?: (text: string) => string }): Promise<ContractChange[]> {
  const base = YAML.parse(released.openapi);
  edit.before?.(base);
  const next = structuredClone(base);
  edit.openapi?.(next);
  const oldText = edit.sdlBefore ? edit.sdlBefore(sdl) : sdl;
  const text = edit.sdl ? edit.sdl(oldText) : oldText;
  const oldSources = { ...released, openapi: YAML.stringify(base), schema: buildSchema(oldText) };
  const newSources = { ...released, openapi: YAML.stringify(next), schema: buildSchema(text) };
  return diffContracts(
    { compiled: compileContracts(oldSources), schema: oldSources.schema },
    { compiled: compileContracts(newSources), schema: newSources.schema },
    NOW,
  );
}

const breaking = (where: string, message: string | RegExp) => ({ kind: 'breaking', where, message: typeof message === 'string' ? message : expect.stringMatching(message) });
const op = (doc: any, path: string, method: string) => doc.paths[path][method];

describe('contract:check', () => {
  it('finds nothing between a contract and itself', async () => {
    expect(await changesOf({})).toEqual([]);
  });

  it('refuses a removed or renamed operation', async () => {
    expect(await changesOf({ openapi: (doc) => delete doc.paths['/v1/users/{userId}/posts'] })).toEqual([
      breaking('GET /v1/users/{userId}/posts (listUserPosts)', 'operation removed or renamed (deprecate it first, with a Sunset date)'),
    ]);
    expect(await changesOf({ openapi: (doc) => (op(doc, '/v1/posts', 'get').operationId = 'listAllPosts') })).toEqual([
      breaking('GET /v1/posts (listPosts)', 'operation removed or renamed (deprecate it first, with a Sunset date)'),
    ]);
  });

  it('refuses a removed response field, a removed parameter and a removed enum value', async () => {
    expect(await changesOf({ openapi: (doc) => delete doc.components.schemas.Post.properties.title })).toEqual(
      expect.arrayContaining([breaking('GET /v1/posts/{postId} (getPost)', 'response 200/title: field removed')]),
    );
    expect(
      await changesOf({ openapi: (doc) => (op(doc, '/v1/posts', 'get').parameters = op(doc, '/v1/posts', 'get').parameters.filter((p: any) => !String(p.$ref).endsWith('/PostStatus'))) }),
    ).toEqual([breaking('GET /v1/posts (listPosts)', 'querystring/status: parameter removed')]);
    const withoutOpaque = await changesOf({ openapi: (doc) => (doc.components.schemas.ClientCreate.properties.accessTokenFormat.enum = ['jwt']) });
    expect(withoutOpaque).toEqual([breaking('POST /v1/clients (createClient)', 'body/accessTokenFormat: enum value opaque removed')]);
  });

  it('refuses a new required input and a narrowed type', async () => {
    expect(await changesOf({ openapi: (doc) => doc.components.schemas.ClientCreate.required.push('firstParty') })).toEqual([
      breaking('POST /v1/clients (createClient)', 'body/firstParty: new required field'),
    ]);
    expect(await changesOf({ openapi: (doc) => (doc.components.schemas.ClientCreate.properties.name.maxLength = 100) })).toEqual([
      breaking('POST /v1/clients (createClient)', 'body/name: maxLength 200 -> 100'),
    ]);
    expect(await changesOf({ openapi: (doc) => (doc.components.schemas.ClientCreate.properties.firstParty.type = 'string') })).toEqual([
      breaking('POST /v1/clients (createClient)', 'body/firstParty: no longer takes boolean'),
    ]);
  });

  it('refuses a scope added to an existing operation, REST or GraphQL, and reports a weaker rule without failing', async () => {
    expect(await changesOf({ openapi: (doc) => op(doc, '/v1/posts', 'get')['x-scopes'].push('read:users') })).toEqual([
      breaking('GET /v1/posts (listPosts)', 'scope read:users added: tokens issued for it no longer suffice'),
    ]);
    const sdlScope = await changesOf({ sdl: (text) => text.replace('post(id: ID!): Post @auth(scopes: ["read:posts"]', 'post(id: ID!): Post @auth(scopes: ["read:posts", "read:users"]') });
    expect(sdlScope).toEqual(expect.arrayContaining([breaking('Query.post', 'scope read:users added: tokens issued for it no longer suffice')]));
    expect(await changesOf({ openapi: (doc) => (op(doc, '/v1/posts/{postId}', 'get')['x-permission'] = 'read_comment') })).toEqual([
      { kind: 'access', where: 'GET /v1/posts/{postId} (getPost)', message: 'permission read_post -> read_comment' },
    ]);
  });

  it('refuses a removed GraphQL field, unless the released schema deprecated it with a Sunset date now past', async () => {
    const removed = (text: string) => text.replace(/\n\s*"Whether the post is published."\n\s*published: Boolean! @deprecated\(reason: "[^"]*"\)/, '');
    expect(await changesOf({ sdl: removed })).toEqual([breaking('Post.published', /^Field 'published' .*removed/)]);
    const withSunset = (date: string) => (text: string) => text.replace('@deprecated(reason: "Use `status` (published or draft).")', `@deprecated(reason: "Use \`status\`. Sunset: ${date}")`);
    expect(await changesOf({ sdlBefore: withSunset('2027-01-01'), sdl: removed })).toEqual([
      { kind: 'retired', where: 'Post.published', message: expect.stringMatching(/removed.*\(after its Sunset date\)$/) },
    ]);
    expect(await changesOf({ sdlBefore: withSunset('2028-01-01'), sdl: removed })).toEqual([breaking('Post.published', /^Field 'published' .*removed/)]);
  });

  it('lets an operation go once its Sunset date has passed, not before', async () => {
    const deprecate = (sunset: string) => (doc: any) => Object.assign(op(doc, '/v1/users/{userId}/posts', 'get'), { deprecated: true, 'x-deprecated-since': '2026-01-01T00:00:00Z', 'x-sunset': sunset, 'x-replaced-by': 'listPosts' });
    const remove = (doc: any) => delete doc.paths['/v1/users/{userId}/posts'];
    expect(await changesOf({ before: deprecate('2027-01-01'), openapi: remove })).toEqual([
      { kind: 'retired', where: 'GET /v1/users/{userId}/posts (listUserPosts)', message: 'removed after its Sunset date' },
    ]);
    expect(await changesOf({ before: deprecate('2028-01-01'), openapi: remove })).toEqual([
      breaking('GET /v1/users/{userId}/posts (listUserPosts)', 'operation removed or renamed before its Sunset date'),
    ]);
  });

  it('passes on this checkout against contracts/released, and fails a breaking change there with exit code 1', () => {
    const tsx = path.resolve('node_modules/tsx/dist/loader.mjs');
    expect(execFileSync(process.execPath, ['--import', tsx, 'codegen/contract-check.ts'], { encoding: 'utf8' })).toContain('compatible with the released one');
    const checkout = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-contract-'));
    try {
      fs.cpSync('contracts', path.join(checkout, 'contracts'), { recursive: true });
      for (const file of ['policy.yaml', 'schema.graphql']) fs.copyFileSync(file, path.join(checkout, file));
      const doc = YAML.parse(released.openapi);
      delete doc.paths['/v1/users/{userId}/posts'];
      fs.writeFileSync(path.join(checkout, 'openapi.yaml'), YAML.stringify(doc));
      let failure: { status: number; stdout: string; stderr: string } | null = null;
      try {
        execFileSync(process.execPath, ['--import', tsx, path.resolve('codegen/contract-check.ts')], { cwd: checkout, encoding: 'utf8', stdio: 'pipe' });
      } catch (error) {
        failure = error as { status: number; stdout: string; stderr: string };
      }
      expect(failure?.status).toBe(1);
      expect(failure?.stdout).toContain('GET /v1/users/{userId}/posts (listUserPosts): operation removed or renamed');
      expect(failure?.stderr).toContain('1 breaking change(s) against contracts/released/');

      // A REST body whose GraphQL input no longer matches: codegen's report, not a stack trace.
      const mirrored = YAML.parse(released.openapi);
      mirrored.components.schemas.PostCreate.properties.status.enum = ['draft'];
      fs.writeFileSync(path.join(checkout, 'openapi.yaml'), YAML.stringify(mirrored));
      let refused: { status: number; stdout: string; stderr: string } | null = null;
      try {
        execFileSync(process.execPath, ['--import', tsx, path.resolve('codegen/contract-check.ts')], { cwd: checkout, encoding: 'utf8', stdio: 'pipe' });
      } catch (error) {
        refused = error as { status: number; stdout: string; stderr: string };
      }
      expect(refused?.status).toBe(1);
      expect(refused?.stderr).toContain("The contract does not compile, so it cannot be compared: The contract has 1 problem(s):\n  - schema.graphql: PostInput.status (Mutation.createPost(input:)): enum PostStatus (draft, published) differs from createPost's request body (draft)");
      expect(refused?.stderr).not.toContain('    at ');
    } finally {
      fs.rmSync(checkout, { recursive: true, force: true });
    }
  });
});
