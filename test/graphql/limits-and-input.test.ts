import { hash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { createPost, type PostView } from '../access/support.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

type Res = Awaited<ReturnType<TestApp['request']>>;

const NO_RATE_LIMITS = { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' };

function post(t: TestApp, body: unknown, token?: string, headers: Record<string, string> = {}): Promise<Res> {
  return t.request({ method: 'POST', url: '/graphql', token, headers: { accept: 'application/graphql-response+json', ...headers }, body });
}

/** A request refused as a whole: its status, `errors` with one error of this code, no `data`. */
function expectRefused(res: Res, status: number, code: string, message?: string | RegExp): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toBe('application/graphql-response+json; charset=utf-8');
  expect(res.headers['cache-control']).toBe('no-store');
  const body = res.json();
  expect(Object.keys(body)).toEqual(['errors']);
  expect(body.errors).toHaveLength(1);
  expect(body.errors[0].extensions.code).toBe(code);
  if (message !== undefined) expect(body.errors[0].message).toMatch(message);
}

describe.each(DATABASE_KINDS)('GraphQL limits, transport and bad input on %s', (kind) => {
  let t: TestApp;
  let member: TestUser;
  let token: string;
  let mine: PostView;

  beforeAll(async () => {
    t = await startTestApp(kind, { ...NO_RATE_LIMITS, GRAPHQL_MAX_DEPTH: '5', GRAPHQL_MAX_COST: '300', GRAPHQL_MAX_ALIASES: '3' });
    member = await t.createUser('member');
    token = await member.token();
    mine = await createPost(t, token, { title: 'mine', status: 'published' });
  });
  afterAll(() => t.close());

  describe('limits, checked before anything runs', () => {
    it('refuses a document deeper than GRAPHQL_MAX_DEPTH, fragments counted, with QUERY_TOO_DEEP naming the limit', async () => {
      const query = 'query { posts(first: 1) { nodes { ...P } } } fragment P on Post { author { posts(first: 1) { nodes { id } } } }';
      expectRefused(await post(t, { query }, token), 400, 'QUERY_TOO_DEEP', /Depth limit/);
    });

    it('refuses a cost over GRAPHQL_MAX_COST, taking first from the variables', async () => {
      const query = 'query ($n: Int!) { posts(first: $n) { nodes { id title body author { id } } } }';
      expect((await post(t, { query, variables: { n: 10 } }, token)).statusCode).toBe(200);
      expectRefused(await post(t, { query, variables: { n: 100 } }, token), 400, 'QUERY_TOO_COMPLEX', /Cost limit/);
    });

    it('refuses a connection without first, or with first over 100, as VALIDATION_FAILED', async () => {
      expectRefused(await post(t, { query: '{ posts { nodes { id } } }' }, token), 400, 'VALIDATION_FAILED', /needs `first`/);
      expectRefused(await post(t, { query: '{ posts(first: 101) { nodes { id } } }' }, token), 400, 'VALIDATION_FAILED', /at most|from 0 to 100/);
    });

    it('refuses more aliases than GRAPHQL_MAX_ALIASES', async () => {
      const query = `{ ${['a', 'b', 'c', 'd'].map((alias) => `${alias}: post(id: "${mine.id}") { id }`).join(' ')} }`;
      expectRefused(await post(t, { query }, token), 400, 'QUERY_TOO_COMPLEX', /Alias limit/);
    });

    it('refuses a batched (array) body while batching is off', async () => {
      expectRefused(await post(t, [{ query: '{ __typename }' }, { query: '{ __typename }' }], token), 400, 'QUERY_TOO_COMPLEX', /Batch size limit/);
    });
  });

  describe('introspection', () => {
    it('needs the read:schema scope, and 401 without a token', async () => {
      const query = '{ __schema { queryType { name } } }';
      expectRefused(await post(t, { query }), 401, 'UNAUTHENTICATED');
      const without = await post(t, { query }, await member.token(['read:posts']));
      expectRefused(without, 403, 'INSUFFICIENT_SCOPE', 'The access token needs the scope read:schema.');
      expect(without.headers['www-authenticate']).toBe('Bearer realm="portcullis", error="insufficient_scope", scope="read:schema"');
      const allowed = await post(t, { query }, token);
      expect({ status: allowed.statusCode, body: allowed.json() }).toEqual({ status: 200, body: { data: { __schema: { queryType: { name: 'Query' } } } } });
    });
  });

  describe('transport', () => {
    it('answers application/json when the client asks for it, and 406 for a type it cannot answer in', async () => {
      const json = await t.request({ method: 'POST', url: '/graphql', token, headers: { accept: 'application/json' }, body: { query: '{ __typename }' } });
      expect({ status: json.statusCode, type: json.headers['content-type'], body: json.json() }).toEqual({
        status: 200,
        type: 'application/json; charset=utf-8',
        body: { data: { __typename: 'Query' } },
      });
      const xml = await t.request({ method: 'POST', url: '/graphql', token, headers: { accept: 'application/xml' }, body: { query: '{ __typename }' } });
      expect(xml.statusCode).toBe(406);
      expect(xml.json().errors[0].extensions.code).toBe('NOT_ACCEPTABLE');
    });

    it('refuses text/plain and multipart bodies (requests another site could send without a preflight)', async () => {
      for (const type of ['text/plain', 'multipart/form-data; boundary=x']) {
        const res = await t.request({ method: 'POST', url: '/graphql', token, headers: { 'content-type': type, accept: 'application/graphql-response+json' }, payload: '{"query":"{ __typename }"}' });
        expectRefused(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
      }
    });

    it('answers PUT and DELETE with 405 and Allow: POST', async () => {
      for (const method of ['PUT', 'DELETE']) {
        const res = await t.request({ method, url: '/graphql', token });
        expect({ status: res.statusCode, allow: res.headers.allow }).toEqual({ status: 405, allow: 'POST' });
      }
    });

    it('refuses a subscription over HTTP', async () => {
      expectRefused(await post(t, { query: 'subscription { postPublished { id } }' }, token), 400, 'VALIDATION_FAILED', /Subscriptions are not served over HTTP/);
    });
  });

  describe('bad input: a 400 with a GraphQL error, never a 500, nothing written', () => {
    async function postCount(): Promise<number> {
      const row = await t.database.db.kysely.selectFrom('posts').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      return Number(row.n);
    }

    it('refuses each malformed request and writes nothing', async () => {
      const before = await postCount();
      const cases: [string, Promise<Res>, number, string][] = [
        ['malformed JSON', t.request({ method: 'POST', url: '/graphql', token, headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' }, payload: '{"query": ' }), 400, 'VALIDATION_FAILED'],
        ['a query that is not a string', post(t, { query: 42 }, token), 400, 'VALIDATION_FAILED'],
        ['no query', post(t, { variables: {} }, token), 400, 'VALIDATION_FAILED'],
        ['variables that are not an object', post(t, { query: '{ __typename }', variables: [1] }, token), 400, 'VALIDATION_FAILED'],
        ['an unknown body property', post(t, { query: '{ __typename }', id: 'x' }, token), 400, 'VALIDATION_FAILED'],
        ['an unknown operationName', post(t, { query: 'query A { __typename }', operationName: 'B' }, token), 400, 'VALIDATION_FAILED'],
        ['two operations and no operationName', post(t, { query: 'query A { __typename } query B { __typename }' }, token), 400, 'VALIDATION_FAILED'],
        ['a syntax error', post(t, { query: 'mutation { createPost(input: { title: "x" ' }, token), 400, 'VALIDATION_FAILED'],
        [
          '__proto__ in variables',
          t.request({
            method: 'POST',
            url: '/graphql',
            token,
            headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
            payload: '{"query":"mutation ($i: PostInput!) { createPost(input: $i) { id } }","variables":{"i":{"title":"t","body":"b","status":"draft","__proto__":{"admin":true}}}}',
          }),
          400,
          'VALIDATION_FAILED',
        ],
        ['a variable of the wrong type', post(t, { query: 'mutation ($i: PostInput!) { createPost(input: $i) { id } }', variables: { i: { title: 't', body: 'b', status: 'archived' } } }, token), 400, 'VALIDATION_FAILED'],
        [
          'a deeply nested input object',
          post(t, { query: 'mutation ($i: PostInput!) { createPost(input: $i) { id } }', variables: { i: JSON.parse('{"title":'.repeat(200) + '"x"' + '}'.repeat(200)) } }, token),
          400,
          'VALIDATION_FAILED',
        ],
        ['a 1 MB query', post(t, { query: `{ __typename ${' '.repeat(1024 * 1024)}}` }, token), 413, 'PAYLOAD_TOO_LARGE'],
        ['more tokens than the limit', post(t, { query: `{ ${'__typename '.repeat(3000)}}` }, token), 400, 'QUERY_TOO_COMPLEX'],
      ];
      for (const [name, pending, status, code] of cases) {
        const res = await pending;
        expect({ name, status: res.statusCode, code: res.json().errors?.[0]?.extensions?.code, data: res.json().data }).toEqual({ name, status, code, data: undefined });
      }
      expect(await postCount()).toBe(before);
    });

    it('reads unicode escapes in the document as the characters they stand for', async () => {
      const res = await post(t, { query: 'mutation { createPost(input: { title: "caf\\u00e9 \\ud83d\\ude00", body: "b", status: draft }) { title } }' }, token);
      expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: { data: { createPost: { title: 'café 😀' } } } });
    });
  });

  describe('audit', () => {
    it('records one decision per root field, interface graphql, allowed and denied alike', async () => {
      const scoped = await member.token(['read:posts']);
      const res = await post(t, { query: `{ post(id: "${mine.id}") { id } comment(id: "${mine.id}") { id } }` }, scoped);
      expect(res.statusCode).toBe(200);
      const requestId = String(res.headers['x-request-id']);
      const rows = await vi.waitFor(
        async () => {
          await t.app.audit.flush();
          const found = await t.database.db.kysely
            .selectFrom('auditEvents')
            .select(['subject', 'interface', 'operation', 'resourceType', 'resourceId', 'decision', 'reason'])
            .where('requestId', '=', requestId)
            .orderBy('operation')
            .execute();
          if (found.length < 2) throw new Error('not yet written');
          return found;
        },
        { timeout: 2000, interval: 20 },
      );
      expect(rows).toEqual([
        { subject: member.id, interface: 'graphql', operation: 'Query.comment', resourceType: 'comment', resourceId: mine.id, decision: 'deny', reason: 'scope' },
        { subject: member.id, interface: 'graphql', operation: 'Query.post', resourceType: 'post', resourceId: mine.id, decision: 'allow', reason: 'resource' },
      ]);
    });
  });
});

describe('trusted documents (GRAPHQL_TRUSTED_DOCUMENTS)', () => {
  const listed = '{ __typename }';
  const listedHash = hash('sha256', listed, 'hex');
  let t: TestApp;
  let token: string;

  beforeAll(async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-trusted-')), 'documents.json');
    fs.writeFileSync(file, JSON.stringify({ [listedHash]: listed }));
    t = await startTestApp('sqlite', { ...NO_RATE_LIMITS, GRAPHQL_TRUSTED_DOCUMENTS: file });
    token = await (await t.createUser('member')).token();
  });
  afterAll(() => t.close());

  it('runs a listed document by its hash, with or without its text, and by its text alone', async () => {
    for (const body of [{ extensions: { persistedQuery: { version: 1, sha256Hash: listedHash } } }, { query: listed, extensions: { persistedQuery: { version: 1, sha256Hash: listedHash } } }, { query: listed }]) {
      const res = await post(t, body, token);
      expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body: { data: { __typename: 'Query' } } });
    }
  });

  it('refuses any other document with PERSISTED_QUERY_NOT_FOUND before parsing it', async () => {
    expectRefused(await post(t, { query: '{ posts(first: 1) { nodes { id } } }' }, token), 400, 'PERSISTED_QUERY_NOT_FOUND');
    expectRefused(await post(t, { extensions: { persistedQuery: { version: 1, sha256Hash: 'f'.repeat(64) } } }, token), 400, 'PERSISTED_QUERY_NOT_FOUND');
    expectRefused(await post(t, { query: '{ posts(first: 1) { nodes { id } } }', extensions: { persistedQuery: { version: 1, sha256Hash: listedHash } } }, token), 400, 'PERSISTED_QUERY_NOT_FOUND');
    expectRefused(await post(t, { query: '{{{{ not even GraphQL' }, token), 400, 'PERSISTED_QUERY_NOT_FOUND');
  });
});

describe('a GraphQL request weighs its cost against the rate limit', () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it('takes the computed cost from the user\'s and the client\'s budgets, and refuses with 429 once they are spent', async () => {
    t = await startTestApp('sqlite', { RATE_LIMIT_MAX: '100', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' });
    const member = await t.createUser('member');
    const token = await member.token();
    // posts(first: 20) multiplies what its nodes ask for by 20: the same measure as GRAPHQL_MAX_COST's.
    const query = 'query { posts(first: 20) { nodes { id author { id } } } }';
    const first = await post(t, { query }, token);
    expect(first.statusCode, first.body).toBe(200);
    const remaining = Number(/r=(\d+)/.exec(String(first.headers.ratelimit))![1]);
    const cost = 100 - remaining;
    expect(cost).toBeGreaterThan(20);
    expect(first.headers['ratelimit-policy']).toMatch(/^"(user|client)";q=100;w=60$/);
    // A query that asks for almost nothing costs one point.
    const cheap = await post(t, { query: '{ __typename }' }, token);
    expect(cheap.statusCode).toBe(200);
    expect(cheap.headers.ratelimit).toMatch(new RegExp(`;r=${remaining - 1};`));
    // Spend the rest with costly queries: the one that does not fit is refused whole, before it runs.
    let last = cheap;
    for (let i = 0; i < Math.ceil(remaining / cost) + 1 && last.statusCode === 200; i++) last = await post(t, { query }, token);
    expectRefused(last, 429, 'RATE_LIMITED', /Too many requests/);
    expect(Number(last.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('refuses with QUERY_TOO_COMPLEX, spending nothing more, an operation that costs more than the whole budget', async () => {
    // A server of its own: the budgets above are spent.
    await t.close();
    t = await startTestApp('sqlite', { RATE_LIMIT_MAX: '100', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' });
    const reader = await t.createUser('member');
    const token = await reader.token();
    // Within GRAPHQL_MAX_COST, but over the 100 points a window holds: it could never run.
    const query = 'query { posts(first: 100) { nodes { id title } } }';
    const refused = await post(t, { query }, token);
    expectRefused(refused, 400, 'QUERY_TOO_COMPLEX', /the operation costs \d+ points, more than the 100 points the caller's rate-limit budget holds per window/);
    // Only the request's own point was spent: the rest of the budget still serves.
    expect(refused.headers.ratelimit).toMatch(/;r=99;/);
    const after = await post(t, { query: 'query { posts(first: 10) { nodes { id } } }' }, token);
    expect(after.statusCode, after.body).toBe(200);
  });
});

describe('a batched GraphQL request weighs the cost of each of its operations', () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it('takes the full cost of every operation of a batch, so a batch costs what its operations sent one by one cost', async () => {
    t = await startTestApp('sqlite', { RATE_LIMIT_MAX: '1000', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000', GRAPHQL_MAX_BATCH: '10' });
    const token = await (await t.createUser('member')).token();
    const remaining = (res: Res) => Number(/r=(\d+)/.exec(String(res.headers.ratelimit))![1]);
    const single = await post(t, { query: '{ me { id } }' }, token);
    expect(single.statusCode).toBe(200);
    const one = 1000 - remaining(single);
    expect(one).toBe(2);
    const batch = await post(t, Array.from({ length: 10 }, () => ({ query: '{ me { id } }' })), token);
    expect(batch.statusCode, batch.body).toBe(200);
    expect(batch.json()).toHaveLength(10);
    expect(remaining(single) - remaining(batch)).toBe(10 * one);
    // Operations that cost one point each are not free inside a batch.
    const typenames = await post(t, Array.from({ length: 10 }, () => ({ query: '{ __typename }' })), token);
    expect(remaining(batch) - remaining(typenames)).toBe(10);
  });
});
