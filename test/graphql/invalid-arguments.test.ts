import fs from 'node:fs';
import { buildSchema, getNamedType, isInputObjectType, type GraphQLArgument, type GraphQLInputField } from 'graphql';
import { createClient as createWsClient } from 'graphql-ws';
import WebSocket from 'ws';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ID_SCHEMA, isIdArgument } from '../../src/graphql/input-validation.js';
import { createComment, createPost, type CommentView, type PostView } from '../access/support.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

// GraphQL arguments are held to what REST holds a request to, before anything reads the database: no string
// (an argument, a variable's value, an input object's field) with a NUL or an unpaired surrogate, and every
// ID argument the contract's `Id`. Each is VALIDATION_FAILED in GraphQL's error shape, with REST's message
// and detail; a query field is null beside it (200), a mutation fails the request (400); nothing is written.

type Res = Awaited<ReturnType<TestApp['request']>>;

const NO_RATE_LIMITS = { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' };
const GRAPHQL_TYPE = 'application/graphql-response+json; charset=utf-8';
const INVALID_TEXT = 'The request contains text that is not valid Unicode.';
const NOT_TEXT = 'contains a NUL character or an unpaired surrogate';
const NOT_CONTRACT = 'The request does not match the contract.';
const NOT_AN_ID = 'must match pattern "^[A-Za-z0-9_-]+$"';

function invalidText(path: string) {
  return { code: 'VALIDATION_FAILED', details: [{ path, message: NOT_TEXT }] };
}

describe('the rules the GraphQL arguments are held to stay the contract\'s', () => {
  it('checks ID arguments against openapi.yaml\'s Id schema', () => {
    const contract = YAML.parse(fs.readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8')) as { components: { schemas: { Id: Record<string, unknown> } } };
    const { description: _description, ...id } = contract.components.schemas.Id;
    expect(ID_SCHEMA).toEqual(id);
  });

  it('takes for an ID exactly the arguments and input fields schema.graphql types as ID', () => {
    const schema = buildSchema(fs.readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8'));
    const named: [string, boolean, boolean][] = [];
    const visit = (where: string, inputs: readonly (GraphQLArgument | GraphQLInputField)[]) => {
      for (const input of inputs) {
        const type = getNamedType(input.type);
        named.push([`${where}(${input.name}:)`, type.name === 'ID', isIdArgument(input.name)]);
        if (isInputObjectType(type)) visit(`${where}.${input.name}`, Object.values(type.getFields()));
      }
    };
    for (const root of [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()]) {
      for (const field of Object.values(root?.getFields() ?? {})) visit(`${root!.name}.${field.name}`, field.args);
    }
    expect(named.filter(([, isId]) => isId).length).toBeGreaterThan(0);
    expect(named.filter(([, isId, taken]) => isId !== taken)).toEqual([]);
  });
});

describe.each(DATABASE_KINDS)('malformed GraphQL arguments on %s', (kind) => {
  let t: TestApp;
  let member: TestUser;
  let token: string;
  let mine: PostView;
  let comment: CommentView;

  beforeAll(async () => {
    t = await startTestApp(kind, NO_RATE_LIMITS);
    member = await t.createUser('member');
    token = await member.token();
    mine = await createPost(t, token, { title: 'mine', status: 'published' });
    comment = await createComment(t, token, mine.id, 'first');
  });
  afterAll(() => t.close());

  function graphql(body: unknown): Promise<Res> {
    return t.request({ method: 'POST', url: '/graphql', token, headers: { accept: 'application/graphql-response+json' }, body });
  }

  /** The whole answer: status, the GraphQL media type, no caching, and the body. */
  function expectAnswer(res: Res, status: number, body: unknown): void {
    expect({ status: res.statusCode, body: res.json() }).toEqual({ status, body });
    expect(res.headers['content-type']).toBe(GRAPHQL_TYPE);
    expect(res.headers['cache-control']).toBe('no-store');
  }

  /** Posts and comments as stored, every column: nothing may change. */
  async function stored() {
    return {
      posts: await t.database.db.kysely.selectFrom('posts').selectAll().orderBy('id').execute(),
      comments: await t.database.db.kysely.selectFrom('comments').selectAll().orderBy('id').execute(),
    };
  }

  describe('a NUL or an unpaired surrogate in a query\'s argument: the field is null with VALIDATION_FAILED (200)', () => {
    it.each([
      ['post(id:)', '{ post(id: "a\\u0000b") { id } }', 'post', '/id'],
      ['user(id:)', '{ user(id: "\\u0000") { id } }', 'user', '/id'],
      ['comment(id:)', '{ comment(id: "\\u0000") { id } }', 'comment', '/id'],
      ['posts(authorId:)', '{ posts(first: 1, authorId: "\\u0000") { nodes { id } } }', 'posts', '/authorId'],
      ['posts(after:)', '{ posts(first: 1, after: "\\u0000") { nodes { id } } }', 'posts', '/after'],
    ])('%s', async (_what, query, field, path) => {
      expectAnswer(await graphql({ query }), 200, {
        data: { [field]: null },
        errors: [{ message: INVALID_TEXT, locations: [{ line: 1, column: 3 }], path: [field], extensions: invalidText(path) }],
      });
    });

    it('in a variable: an unpaired surrogate, and a NUL', async () => {
      const query = 'query ($id: ID!) { post(id: $id) { id } }';
      for (const id of ['\ud800', 'ab\udc00', 'a\u0000']) {
        expectAnswer(await graphql({ query, variables: { id } }), 200, {
          data: { post: null },
          errors: [{ message: INVALID_TEXT, locations: [{ line: 1, column: 20 }], path: ['post'], extensions: invalidText('/id') }],
        });
      }
    });

    it('leaves the request\'s other fields their data', async () => {
      expectAnswer(await graphql({ query: `{ bad: post(id: "\\u0000") { id } good: post(id: "${mine.id}") { id } }` }), 200, {
        data: { bad: null, good: { id: mine.id } },
        errors: [{ message: INVALID_TEXT, locations: [{ line: 1, column: 3 }], path: ['bad'], extensions: invalidText('/id') }],
      });
    });
  });

  describe('an ID that is not the contract\'s Id: VALIDATION_FAILED with REST\'s detail, as REST answers the same id in a path', () => {
    it.each([
      ['a dot', 'a.b', [NOT_AN_ID]],
      ['a slash', 'a/b', [NOT_AN_ID]],
      ['65 characters', 'a'.repeat(65), ['must NOT have more than 64 characters']],
      ['nothing', '', ['must NOT have fewer than 1 characters', NOT_AN_ID]],
    ])('%s', async (_what, id, messages) => {
      const res = await graphql({ query: 'query ($id: ID!) { post(id: $id) { id } }', variables: { id } });
      expectAnswer(res, 200, {
        data: { post: null },
        errors: [{ message: NOT_CONTRACT, locations: [{ line: 1, column: 20 }], path: ['post'], extensions: { code: 'VALIDATION_FAILED', details: messages.map((message) => ({ path: '/id', message })) } }],
      });
      if (id === '' || id.includes('/')) return;
      // REST's answer to the same id as a path parameter: the same code, message and detail messages.
      const rest = await t.request({ url: `/v1/posts/${encodeURIComponent(id)}`, token });
      expect({ status: rest.statusCode, body: rest.json() }).toEqual({
        status: 400,
        body: { error: { code: 'VALIDATION_FAILED', message: NOT_CONTRACT, details: messages.map((message) => ({ path: '/path/postId', message })) } },
      });
    });

    it('in posts(authorId:), as GET /v1/posts?authorId= answers it', async () => {
      expectAnswer(await graphql({ query: '{ posts(first: 1, authorId: "a.b") { nodes { id } } }' }), 200, {
        data: { posts: null },
        errors: [{ message: NOT_CONTRACT, locations: [{ line: 1, column: 3 }], path: ['posts'], extensions: { code: 'VALIDATION_FAILED', details: [{ path: '/authorId', message: NOT_AN_ID }] } }],
      });
    });

    it('still answers a well-formed id that names nothing with NOT_FOUND', async () => {
      expectAnswer(await graphql({ query: '{ post(id: "nothing-here") { id } }' }), 200, {
        data: { post: null },
        errors: [{ message: 'The resource does not exist.', locations: [{ line: 1, column: 3 }], path: ['post'], extensions: { code: 'NOT_FOUND' } }],
      });
    });
  });

  describe('a mutation with a malformed argument fails the request with 400 and writes nothing', () => {
    const cases: [string, () => { query: string; variables?: Record<string, unknown> }, number, unknown][] = [
      ['deletePost(id:) with a NUL', () => ({ query: 'mutation { deletePost(id: "\\u0000") }' }), 12, invalidText('/id')],
      ['deleteComment(id:) with a NUL', () => ({ query: 'mutation { deleteComment(id: "\\u0000") }' }), 12, invalidText('/id')],
      ['createComment(postId:) with a NUL', () => ({ query: 'mutation { createComment(postId: "\\u0000", input: { body: "x" }) { id } }' }), 12, invalidText('/postId')],
      [
        'createComment(postId:) that is no Id',
        () => ({ query: 'mutation { createComment(postId: "../x", input: { body: "x" }) { id } }' }),
        12,
        { code: 'VALIDATION_FAILED', details: [{ path: '/postId', message: NOT_AN_ID }] },
      ],
      [
        'createPost with an unpaired surrogate in the input, from a variable',
        () => ({ query: 'mutation ($i: PostInput!) { createPost(input: $i) { title } }', variables: { i: { title: 'lone \ud800', body: 'b', status: 'draft' } } }),
        29,
        invalidText('/input/title'),
      ],
      [
        'createPost with a NUL in the input, in the document',
        () => ({ query: 'mutation { createPost(input: { title: "t", body: "b\\u0000", status: draft }) { title } }' }),
        12,
        invalidText('/input/body'),
      ],
      [
        'replacePost of an existing post with a trailing surrogate in the input',
        () => ({ query: 'mutation ($id: ID!, $i: PostInput!) { replacePost(id: $id, input: $i) { title } }', variables: { id: mine.id, i: { title: 'x\udc00', body: 'b', status: 'published' } } }),
        39,
        invalidText('/input/title'),
      ],
      [
        'replaceComment of an existing comment with a NUL in the input',
        () => ({ query: 'mutation ($id: ID!, $b: String!) { replaceComment(id: $id, input: { body: $b }) { body } }', variables: { id: comment.id, b: '\u0000' } }),
        36,
        invalidText('/input/body'),
      ],
    ];

    it.each(cases)('%s', async (_what, request, column, extensions) => {
      const before = await stored();
      const { query, variables } = request();
      const field = /\{ (\w+)\(/.exec(query)![1]!;
      const message = (extensions as { details: { message: string }[] }).details[0]!.message === NOT_TEXT ? INVALID_TEXT : NOT_CONTRACT;
      expectAnswer(await graphql({ query, variables }), 400, {
        data: null,
        errors: [{ message, locations: [{ line: 1, column }], path: [field], extensions }],
      });
      expect(await stored()).toEqual(before);
    });
  });

  it('refuses a subscription whose postId has a NUL, or is no Id, before it starts', async () => {
    const address = await t.app.fastify.listen({ host: '127.0.0.1', port: 0 });
    const client = createWsClient({ url: `${address.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${token}` }, retryAttempts: 0 });
    try {
      const first = (postId: string) =>
        new Promise<unknown>((resolve, reject) => {
          client.subscribe({ query: 'subscription ($post: ID!) { commentAdded(postId: $post) { body } }', variables: { post: postId } }, { next: resolve, error: reject, complete: () => resolve('completed') });
        });
      // A refused source stream has no data at all (GraphQL spec, CreateSourceEventStream).
      expect(await first('a\u0000')).toEqual({ errors: [{ message: INVALID_TEXT, locations: [{ line: 1, column: 29 }], path: ['commentAdded'], extensions: invalidText('/postId') }] });
      expect(await first('a.b')).toEqual({
        errors: [{ message: NOT_CONTRACT, locations: [{ line: 1, column: 29 }], path: ['commentAdded'], extensions: { code: 'VALIDATION_FAILED', details: [{ path: '/postId', message: NOT_AN_ID }] } }],
      });
    } finally {
      await client.dispose();
    }
  });
});
