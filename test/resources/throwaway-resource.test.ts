/**
 * A resource type that is not in the contract — jottings, owner-only — added the way the README's "Adding a
 * resource to the contract" says, and served end to end: its contract fragment (schemas, operations with
 * their access rules, two scopes), its policy.yaml entry, its migration, its resource module and its
 * handlers, and nothing else.
 *
 * The lightest honest way to build it: the fragment is merged into this checkout's openapi.yaml and
 * policy.yaml in memory and compiled by the same contract compiler `npm run codegen` runs
 * (codegen/compile-contracts.ts: every access rule checked, the route and policy tables built), instead of
 * writing a second generated/ tree, which would race the other suites and would add typed handlers only
 * to be typechecked by another tsc run. The compiled routes and policy, the generated handlers plus the
 * jottings', the resource registry plus the jottings module and the jottings migration reach buildApp as one
 * ServedApi, the seam the generated contract passes through too: the same pipeline, policy layer, Fastify
 * routes, validation, serialisation and storage serve it. Two things differ from a committed resource: the
 * handlers are typed by hand (generated/openapi.d.ts does not know the type), and the published contract
 * (GET /v1/rest, generated/openapi.json) does not list it.
 */
import fs from 'node:fs';
import os from 'node:os';
import type { Kysely } from 'kysely';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileContracts, readSources } from '../../codegen/compile-contracts.js';
import { buildApp, GENERATED_API, type ServedApi } from '../../src/app.js';
import { configFrom } from '../../src/config/config.js';
import { pageBody, pageRequest } from '../../src/operations/pages.js';
import { callerId } from '../../src/operations/subject.js';
import type { OperationContext } from '../../src/operations/types.js';
import { deleteResources } from '../../src/resources/delete.js';
import { expandAll } from '../../src/resources/expand.js';
import { listReadable } from '../../src/resources/lists.js';
import { defineResource } from '../../src/resources/resource-module.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { insertRow } from '../../src/storage/resource-rows.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { contractDisagreements } from '../helpers/resource-contract.js';
import { ALL_API_SCOPES, startTestApp, type TestApp, type TestUser } from '../helpers/app.js';

// --- 1. the contract fragment (openapi.yaml) ---------------------------------------------------------
const ERRORS = { '400': 'BadRequest', '401': 'Unauthorized', '403': 'Forbidden', '404': 'NotFound' };
const errors = (...statuses: (keyof typeof ERRORS)[]) => Object.fromEntries(statuses.map((s) => [s, { $ref: `#/components/responses/${ERRORS[s]}` }]));
const json = (schema: string, description: string) => ({ description, content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } } });
const JOTTING_EXPAND = { name: 'expand', in: 'query', required: false, style: 'form', explode: true, description: 'Embeds the author.', schema: { type: 'array', uniqueItems: true, maxItems: 1, items: { type: 'string', enum: ['author'] } } };
const JOTTING_ID = { name: 'jottingId', in: 'path', required: true, description: 'The jotting.', schema: { $ref: '#/components/schemas/Id' } };
const JOTTING_SCHEMAS = {
  Jotting: {
    type: 'object', additionalProperties: false, required: ['id', 'authorId', 'text', 'createdAt'],
    properties: {
      id: { $ref: '#/components/schemas/Id' }, authorId: { $ref: '#/components/schemas/Id' }, text: { type: 'string', minLength: 1, maxLength: 500 },
      createdAt: { $ref: '#/components/schemas/Timestamp' }, author: { $ref: '#/components/schemas/User' },
    },
  },
  JottingCreate: { type: 'object', additionalProperties: false, required: ['text'], properties: { text: { type: 'string', minLength: 1, maxLength: 500 } } },
  JottingList: { type: 'object', additionalProperties: false, required: ['data', 'page'], properties: { data: { type: 'array', items: { $ref: '#/components/schemas/Jotting' } }, page: { $ref: '#/components/schemas/PageInfo' } } },
};
const JOTTING_PATHS = {
  '/v1/jottings': {
    get: {
      operationId: 'listJottings', tags: ['Jottings'], summary: 'List jottings', 'x-scopes': ['read:jottings'], 'x-permission': 'read_jotting',
      parameters: [
        { $ref: '#/components/parameters/Limit' }, { $ref: '#/components/parameters/Page' }, { $ref: '#/components/parameters/After' },
        { name: 'authorId', in: 'query', required: false, description: 'Only this author\'s jottings.', schema: { $ref: '#/components/schemas/Id' } }, JOTTING_EXPAND,
      ],
      responses: { '200': json('JottingList', 'One page of jottings.'), ...errors('400', '401', '403') },
    },
    post: {
      operationId: 'createJotting', tags: ['Jottings'], summary: 'Write a jotting', 'x-scopes': ['write:jottings'], 'x-permission': 'create_jotting',
      requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/JottingCreate' } } } },
      responses: { '201': json('Jotting', 'The jotting.'), ...errors('400', '401', '403') },
    },
  },
  '/v1/jottings/{jottingId}': {
    get: {
      operationId: 'getJotting', tags: ['Jottings'], summary: 'Read a jotting', 'x-scopes': ['read:jottings'], 'x-permission': 'read_jotting',
      'x-resource': { type: 'jotting', param: 'jottingId', action: 'read' }, parameters: [JOTTING_ID, JOTTING_EXPAND],
      responses: { '200': json('Jotting', 'The jotting.'), ...errors('400', '401', '403', '404') },
    },
    delete: {
      operationId: 'deleteJotting', tags: ['Jottings'], summary: 'Delete a jotting', 'x-scopes': ['write:jottings'], 'x-permission': 'delete_jotting',
      'x-resource': { type: 'jotting', param: 'jottingId', action: 'delete' }, parameters: [JOTTING_ID],
      responses: { '204': { description: 'Deleted.' }, ...errors('401', '403', '404') },
    },
  },
};
const JOTTING_SCOPES = { 'read:jottings': 'Read your jottings', 'write:jottings': 'Write your jottings' };

// --- 2. the policy entry (policy.yaml) ----------------------------------------------------------------
const JOTTING_PERMISSIONS = { read_jotting: 'Read jottings', create_jotting: 'Write jottings', delete_jotting: 'Delete jottings' };
const JOTTING_POLICY = { schema: 'Jotting', owner: 'authorId', rules: { read: ['owner'], delete: ['owner'] } };

function contractWithJottings() {
  const sources = readSources();
  const doc = YAML.parse(sources.openapi);
  Object.assign(doc.paths, JOTTING_PATHS);
  Object.assign(doc.components.schemas, JOTTING_SCHEMAS);
  doc.components.schemas.Scope.enum.push(...Object.keys(JOTTING_SCOPES));
  for (const flow of ['authorizationCode', 'clientCredentials']) Object.assign(doc.components.securitySchemes.oauth2.flows[flow].scopes, JOTTING_SCOPES);
  const policySource = YAML.parse(sources.policy);
  Object.assign(policySource.permissions, JOTTING_PERMISSIONS);
  for (const role of Object.values<any>(policySource.roles)) role.permissions.push(...Object.keys(JOTTING_PERMISSIONS));
  policySource.resources.jotting = JOTTING_POLICY;
  return { doc, compiled: compileContracts({ ...sources, openapi: YAML.stringify(doc), policy: YAML.stringify(policySource) }) };
}

// --- 3. the migration ------------------------------------------------------------------------------
const jottingsMigration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('jottings')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('author_id', 'text', (c) => c.notNull())
      .addColumn('text', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('jottings_author_idx').on('jottings').columns(['author_id', 'id']).execute();
  },
};

// --- 4. the resource module ------------------------------------------------------------------------
interface JottingView { id: string; authorId: string; text: string; createdAt: string }
const jottings = defineResource<JottingView>({
  type: 'jotting',
  table: { name: 'jottings', columns: ['id', 'authorId', 'text', 'createdAt'] },
  expansions: { author: { via: 'authorId', type: 'user' } },
  filters: ['authorId'],
});

// --- 5. the handlers -------------------------------------------------------------------------------
type Input = { params: Record<string, string>; query: { limit?: number; page?: number; after?: string; expand?: string[] } & Record<string, unknown>; body: { text: string } };
const jottingHandlers = {
  listJottings: async ({ query }: Input, { principal, deps, loaders }: OperationContext) => {
    const page = await listReadable(deps, principal, jottings, query, pageRequest(query));
    const data = await expandAll({ principal, loaders, policy: deps.policy }, jottings, page.rows, query.expand);
    return { status: 200, body: pageBody(data, page, query.limit ?? 20) };
  },
  createJotting: async ({ body }: Input, { principal, deps }: OperationContext) => {
    const jotting: JottingView = { id: newId(), authorId: callerId(principal), text: body.text, createdAt: nowIso() };
    await insertRow(deps.db, deps.sqlite, jottings.table, { ...jotting });
    return { status: 201, body: jotting, headers: { location: `/v1/jottings/${jotting.id}` } };
  },
  getJotting: async ({ query }: Input, { principal, resource, deps, loaders }: OperationContext) => {
    const [jotting] = await expandAll({ principal, loaders, policy: deps.policy }, jottings, [resource!], query.expand);
    return { status: 200, body: jotting };
  },
  deleteJotting: async (_input: Input, { resource, deps }: OperationContext) => {
    await deleteResources(deps.db, deps.resources, jottings, [jottings.viewOf(resource!).id]);
    return { status: 204, body: undefined };
  },
};

const { doc, compiled } = contractWithJottings();
const api: ServedApi = {
  routes: compiled.routes,
  policy: compiled.policy,
  handlers: { ...GENERATED_API.handlers, ...jottingHandlers },
  resources: GENERATED_API.resources.with(jottings),
  migrations: { '900-jottings': jottingsMigration },
};
const JOTTING_TOKEN_SCOPES = [...ALL_API_SCOPES, ...Object.keys(JOTTING_SCOPES)];

describe('a resource type added as the README says', () => {
  it('compiles with the contract, and its module agrees with its contract fragment', () => {
    expect(compiled.routes.map((r) => r.operationId)).toEqual(expect.arrayContaining(Object.keys(jottingHandlers)));
    expect(compiled.policy.resources.jotting).toEqual({ schema: 'Jotting', owner: 'authorId', rules: { read: ['owner'], delete: ['owner'] }, protectedFields: {} });
    expect(contractDisagreements(doc, compiled.policy, api.resources)).toEqual([]);
    // The checked-in contract does not have it: this test is the only place it exists.
    expect(fs.readFileSync('openapi.yaml', 'utf8')).not.toContain('/v1/jottings');
  });

  it('is refused at start without its module or without a handler', async () => {
    const config = configFrom({ DATA_DIR: os.tmpdir(), ISSUER: 'http://127.0.0.1:3000', KEY_ENCRYPTION_SECRET: 'test-key-encryption-secret-0123456789abcdef' });
    await expect(buildApp(config, { api: { ...api, resources: GENERATED_API.resources } })).rejects.toThrow(
      'policy resource types (client, comment, jotting, post, user) and resource modules (client, comment, post, user) differ',
    );
    const { deleteJotting: _omitted, ...handlers } = api.handlers;
    await expect(buildApp(config, { api: { ...api, handlers } })).rejects.toThrow('no handler for deleteJotting');
  });
});

describe.each(DATABASE_KINDS)('a resource type added as the README says, served on %s', (kind) => {
  let t: TestApp;
  let alice: TestUser;
  let bob: TestUser;
  let aliceToken: string;
  let bobToken: string;

  beforeAll(async () => {
    t = await startTestApp(kind, {}, { api });
    alice = await t.createUser('member');
    bob = await t.createUser('member');
    aliceToken = await alice.token(JOTTING_TOKEN_SCOPES);
    bobToken = await bob.token(JOTTING_TOKEN_SCOPES);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function write(token: string, text: string) {
    const res = await t.request({ method: 'POST', url: '/v1/jottings', token, body: { text } });
    expect(res.statusCode, res.body).toBe(201);
    return res;
  }

  it('creates a jotting whose author is the caller, and shows it to its owner only: others get the 404 of a missing jotting', async () => {
    const created = await write(aliceToken, 'Buy milk');
    const jotting = created.json();
    expect(jotting).toEqual({ id: expect.any(String), authorId: alice.id, text: 'Buy milk', createdAt: expect.any(String) });
    expect(created.headers.location).toBe(`/v1/jottings/${jotting.id}`);

    const own = await t.request({ url: `/v1/jottings/${jotting.id}`, token: aliceToken });
    expect(own.statusCode).toBe(200);
    expect(own.json()).toEqual(jotting);
    expect(own.headers.etag).toEqual(expect.any(String));

    const others = await t.request({ url: `/v1/jottings/${jotting.id}`, token: bobToken });
    const missing = await t.request({ url: `/v1/jottings/${newId()}`, token: bobToken });
    expect(others.statusCode).toBe(404);
    expect(others.json()).toEqual({ error: { code: 'NOT_FOUND', message: expect.any(String) } });
    expect(others.body).toBe(missing.body);
    expect((await t.request({ method: 'DELETE', url: `/v1/jottings/${jotting.id}`, token: bobToken })).statusCode).toBe(404);
    expect((await t.request({ url: `/v1/jottings/${jotting.id}`, token: aliceToken })).statusCode).toBe(200);
  });

  it('checks scopes, permissions and the contract like every other operation', async () => {
    const withoutScope = await t.request({ url: '/v1/jottings', token: await alice.token(ALL_API_SCOPES) });
    expect(withoutScope.statusCode).toBe(403);
    expect(withoutScope.json().error.code).toBe('INSUFFICIENT_SCOPE');
    expect((await t.request({ url: '/v1/jottings' })).statusCode).toBe(401);
    const invalid = await t.request({ method: 'POST', url: '/v1/jottings', token: aliceToken, body: { text: 'x', authorId: bob.id } });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json().error.code).toBe('VALIDATION_FAILED');
  });

  it('lists only the caller\'s jottings, filtered in the database and by its declared filter, with the author embedded', async () => {
    const mine = [(await write(aliceToken, 'one')).json(), (await write(aliceToken, 'two')).json()];
    await write(bobToken, 'bob\'s');
    const aliceView = (await t.request({ url: `/v1/users/${alice.id}`, token: aliceToken })).json();

    const page = await t.request({ url: `/v1/jottings?authorId=${alice.id}&limit=1&expand=author`, token: aliceToken });
    expect(page.statusCode, page.body).toBe(200);
    const first = page.json();
    expect(first.data).toEqual([expect.objectContaining({ authorId: alice.id, author: aliceView })]);
    const all = (await t.request({ url: '/v1/jottings?limit=100', token: aliceToken })).json();
    expect(all.data.map((n: JottingView) => n.authorId)).toEqual(all.data.map(() => alice.id));
    expect(all.data.slice(-2)).toEqual(mine);
    expect((await t.request({ url: `/v1/jottings?authorId=${bob.id}`, token: aliceToken })).json()).toEqual({ data: [], page: { limit: 20, next: null } });
  });

  it('deletes the owner\'s jotting', async () => {
    const jotting = (await write(aliceToken, 'to delete')).json();
    const deleted = await t.request({ method: 'DELETE', url: `/v1/jottings/${jotting.id}`, token: aliceToken });
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    expect((await t.request({ url: `/v1/jottings/${jotting.id}`, token: aliceToken })).statusCode).toBe(404);
  });
});
