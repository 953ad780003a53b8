import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from '../../src/errors/registry.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { fillPasswordWork } from '../helpers/password-work.js';
import { createComment, createPost, type PostView } from '../access/support.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

const GQL = 'application/graphql-response+json; charset=utf-8';

describe.each(DATABASE_KINDS)('POST /graphql on %s', (kind) => {
  let t: TestApp;
  let author: TestUser;
  let member: TestUser;
  let authorToken: string;
  let memberToken: string;
  let published: PostView;
  let draft: PostView;

  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' });
    author = await t.createUser('member');
    member = await t.createUser('member');
    authorToken = await author.token();
    memberToken = await member.token();
    published = await createPost(t, authorToken, { title: 'Published', status: 'published' });
    draft = await createPost(t, authorToken, { title: 'Draft', status: 'draft' });
    await createComment(t, authorToken, published.id, 'first');
  });
  afterAll(() => t.close());

  const gql = (query: string, options: { token?: string; variables?: unknown; headers?: Record<string, string>; operationName?: string } = {}) =>
    t.request({
      method: 'POST',
      url: '/graphql',
      token: options.token,
      headers: { accept: 'application/graphql-response+json', ...options.headers },
      body: { query, ...(options.variables ? { variables: options.variables } : {}), ...(options.operationName ? { operationName: options.operationName } : {}) },
    });

  it('reads a post with its author through the same handlers and policy as REST', async () => {
    const query = 'query ($id: ID!) { post(id: $id) { id title status author { id } } }';
    const res = await gql(query, { token: authorToken, variables: { id: published.id } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe(GQL);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toEqual({ data: { post: { id: published.id, title: 'Published', status: 'published', author: { id: author.id } } } });

    // Another member reads the post but not its author's profile (users: owner, editors, admins): the author
    // is null with NOT_FOUND, exactly as for an author that does not exist.
    const other = await gql(query, { token: memberToken, variables: { id: published.id } });
    expect({ status: other.statusCode, body: other.json() }).toEqual({
      status: 200,
      body: {
        data: { post: { id: published.id, title: 'Published', status: 'published', author: null } },
        errors: [{ message: 'The resource does not exist.', locations: [{ line: 1, column: 52 }], path: ['post', 'author'], extensions: { code: 'NOT_FOUND' } }],
      },
    });
  });

  it('answers another member\'s draft exactly like a post that does not exist: null and NOT_FOUND with its path', async () => {
    const denied = await gql(`{ post(id: "${draft.id}") { id } }`, { token: memberToken });
    const missing = await gql('{ post(id: "00000000000000000000000000000000") { id } }', { token: memberToken });
    const expected = { data: { post: null }, errors: [{ message: 'The resource does not exist.', locations: [{ line: 1, column: 3 }], path: ['post'], extensions: { code: 'NOT_FOUND' } }] };
    expect({ status: denied.statusCode, body: denied.json() }).toEqual({ status: 200, body: expected });
    expect({ status: missing.statusCode, body: missing.json() }).toEqual({ status: 200, body: expected });
  });

  it('pages a connection filtered in the database by the read rule', async () => {
    const res = await gql('{ posts(first: 10) { nodes { id title } pageInfo { hasNextPage endCursor } } }', { token: memberToken });
    expect(res.statusCode, res.body).toBe(200);
    const ids = res.json().data.posts.nodes.map((node: { id: string }) => node.id);
    expect(ids).toContain(published.id);
    expect(ids).not.toContain(draft.id);
    expect(res.json().data.posts.pageInfo).toEqual({ hasNextPage: false, endCursor: null });
  });

  it('refuses a missing token on a protected field with 401, the Bearer challenge and no data', async () => {
    const res = await gql('{ posts(first: 1) { nodes { id } } }');
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="portcullis"');
    expect(res.json()).toEqual({ errors: [{ message: 'Authentication is required.', extensions: { code: 'UNAUTHENTICATED' } }] });
  });

  it('answers a token without the scope with INSUFFICIENT_SCOPE on that field, the rest of the data intact', async () => {
    const token = await member.token(['read:posts']);
    const res = await gql(`{ post(id: "${published.id}") { id } comment(id: "x") { id } }`, { token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      data: { post: { id: published.id }, comment: null },
      errors: [{ message: 'The access token needs the scope read:comments.', locations: [{ line: 1, column: 55 }], path: ['comment'], extensions: { code: 'INSUFFICIENT_SCOPE' } }],
    });
  });

  it('keeps the rest of the data when a connection or a relation is refused: the refused field alone is null', async () => {
    const token = await member.token(['read:posts']);
    const lists = await gql('{ users(first: 3) { nodes { id } } posts(first: 1, authorId: "' + author.id + '") { nodes { id } } }', { token });
    expect({ status: lists.statusCode, body: lists.json() }).toEqual({
      status: 200,
      body: {
        data: { users: null, posts: { nodes: [{ id: published.id }] } },
        errors: [{ message: 'The access token needs the scope read:users.', locations: [{ line: 1, column: 3 }], path: ['users'], extensions: { code: 'INSUFFICIENT_SCOPE' } }],
      },
    });
    const query = `{ post(id: "${published.id}") { title commentCount comments(first: 1) { nodes { id } } } }`;
    const nested = await gql(query, { token });
    const column = (field: string) => query.indexOf(field) + 1;
    expect({ status: nested.statusCode, body: nested.json() }).toEqual({
      status: 200,
      body: {
        data: { post: { title: 'Published', commentCount: null, comments: null } },
        errors: [
          { message: 'The access token needs the scope read:comments.', locations: [{ line: 1, column: column('commentCount') }], path: ['post', 'commentCount'], extensions: { code: 'INSUFFICIENT_SCOPE' } },
          { message: 'The access token needs the scope read:comments.', locations: [{ line: 1, column: column('comments(') }], path: ['post', 'comments'], extensions: { code: 'INSUFFICIENT_SCOPE' } },
        ],
      },
    });
  });

  it('names a bad cursor by its argument: details[].path /after, the field null beside the rest', async () => {
    const query = `{ posts(first: 2, after: "garbage") { nodes { id } } post(id: "${published.id}") { id } }`;
    const res = await gql(query, { token: memberToken });
    expect({ status: res.statusCode, body: res.json() }).toEqual({
      status: 200,
      body: {
        data: { posts: null, post: { id: published.id } },
        errors: [
          {
            message: 'The cursor is not valid.',
            locations: [{ line: 1, column: 3 }],
            path: ['posts'],
            extensions: { code: 'VALIDATION_FAILED', details: [{ path: '/after', message: 'is not a cursor from this API' }] },
          },
        ],
      },
    });
  });

  it('runs a mutation through the REST handler and validator, and refuses input the REST body would refuse', async () => {
    const created = await gql('mutation { createPost(input: { title: "From GraphQL", body: "b", status: draft }) { id title status authorId } }', { token: memberToken });
    expect(created.statusCode, created.body).toBe(200);
    const post = created.json().data.createPost;
    expect(post).toEqual({ id: expect.any(String), title: 'From GraphQL', status: 'draft', authorId: member.id });
    const rest = await t.request({ url: `/v1/posts/${post.id}`, token: memberToken });
    expect(rest.json().title).toBe('From GraphQL');

    const tooLong = await gql(`mutation { createPost(input: { title: "${'x'.repeat(500)}", body: "b", status: draft }) { id } }`, { token: memberToken });
    expect(tooLong.statusCode).toBe(400);
    expect(tooLong.json().data).toBeNull();
    expect(tooLong.json().errors[0].extensions.code).toBe('VALIDATION_FAILED');
    expect(tooLong.json().errors[0].extensions.details[0].path).toBe('/input/title');
  });

  it('creates a user through the REST handler: no password in the answer, a taken email is CONFLICT', async () => {
    const admin = await (await t.createUser('admin')).token();
    const query = 'mutation ($input: UserCreateInput!) { createUser(input: $input) { id email name role active } }';
    const input = { email: `gql-${Date.now()}@example.com`, name: 'From GraphQL', role: 'member', password: 'a-long-enough-password' };
    const created = await gql(query, { token: admin, variables: { input } });
    expect({ status: created.statusCode, body: created.json() }).toEqual({
      status: 200,
      body: { data: { createUser: { id: expect.any(String), email: input.email, name: 'From GraphQL', role: 'member', active: true } } },
    });
    const stored = await t.database.db.kysely.selectFrom('users').select('passwordHash').where('email', '=', input.email).executeTakeFirstOrThrow();
    expect(stored.passwordHash).not.toContain(input.password);
    const again = await gql(query, { token: admin, variables: { input } });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ data: null, errors: [{ path: ['createUser'], extensions: { code: 'CONFLICT' } }] });
    // A member may not create users (role), and a short password is the REST body's validation failure.
    expect((await gql(query, { token: memberToken, variables: { input: { ...input, email: `x-${input.email}` } } })).json().errors[0].extensions.code).toBe('FORBIDDEN');
    const short = await gql(query, { token: admin, variables: { input: { ...input, email: `y-${input.email}`, password: 'short' } } });
    expect(short.json().errors[0].extensions).toMatchObject({ code: 'VALIDATION_FAILED', details: [{ path: '/input/password' }] });
  });

  it('answers createUser with 503 UNAVAILABLE and Retry-After, creating nobody, while the process hashes as many passwords as it may', async () => {
    const admin = await (await t.createUser('admin')).token();
    const filled = fillPasswordWork();
    try {
      const email = `gql-refused-${Date.now()}@example.com`;
      const query = 'mutation ($input: UserCreateInput!) { createUser(input: $input) { id } }';
      const refused = await gql(query, { token: admin, variables: { input: { email, name: 'Refused', role: 'member', password: 'a-long-enough-password' } } });
      expect({ status: refused.statusCode, retryAfter: refused.headers['retry-after'], body: refused.json() }).toEqual({
        status: 503,
        retryAfter: String(UNAVAILABLE_RETRY_AFTER_SECONDS),
        body: {
          data: null,
          errors: [{ message: 'Too many passwords are being checked at the moment; retry shortly.', locations: [{ line: 1, column: 39 }], path: ['createUser'], extensions: { code: 'UNAVAILABLE' } }],
        },
      });
      expect(await t.database.db.kysely.selectFrom('users').select('id').where('email', '=', email).executeTakeFirst()).toBeUndefined();
    } finally {
      await filled.release();
    }
  });

  it('answers GET with 405 and Allow: POST, and refuses a form body (CSRF) with 415', async () => {
    const get = await t.request({ url: '/graphql?query={__typename}' });
    expect(get.statusCode).toBe(405);
    expect(get.headers.allow).toBe('POST');
    const form = await t.request({ method: 'POST', url: '/graphql', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'query=%7B__typename%7D' });
    expect(form.statusCode).toBe(415);
    expect(form.json().errors[0].extensions.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });

  it('still answers the deprecated Post.published, as its replacement status says; the SDL marks it', async () => {
    const res = await gql(`{ post(id: "${published.id}") { status published } }`, { token: authorToken });
    expect(res.json()).toEqual({ data: { post: { status: 'published', published: true } } });
    const ownDraft = await gql(`{ post(id: "${draft.id}") { status published } }`, { token: authorToken });
    expect(ownDraft.json()).toEqual({ data: { post: { status: 'draft', published: false } } });
    const sdl = await t.request({ url: '/v1/graphql', token: authorToken });
    expect(sdl.statusCode).toBe(200);
    expect(sdl.body).toContain('published: Boolean! @deprecated(reason: "Use `status` (published or draft).")');
  });

  it('refuses an unknown field naming it, without suggestions', async () => {
    const res = await gql('{ postz(first: 1) { id } }', { token: memberToken });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ errors: [{ message: 'Cannot query field "postz" on type "Query".', locations: [{ line: 1, column: 3 }], extensions: { code: 'VALIDATION_FAILED' } }] });
  });
});
