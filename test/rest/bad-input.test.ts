import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const CONTRACT_MISMATCH = 'The request does not match the contract.';
const NOT_JSON = 'The body is not valid JSON.';
const POISONING = 'The body may not use "__proto__" or "constructor.prototype" as property names.';
const NOT_UNICODE = 'The request contains text that is not valid Unicode.';
const NUL_OR_SURROGATE = 'contains a NUL character or an unpaired surrogate';
const ID_PATTERN = 'must match pattern "^[A-Za-z0-9_-]+$"';

/** SQL metacharacters and injection attempts, used in every string field and every parameter. */
const SQL_META = [
  "' OR 1=1 --",
  '"; DROP TABLE posts; --',
  "'; DELETE FROM users; --",
  "Robert'); DROP TABLE comments;--",
  "' UNION SELECT password_hash, 1, 1, 1, 1, 1, 1 FROM users --",
  '%',
  '_',
  '%_%',
  '\\',
  "\\'; --",
  '\\\\%',
  '--',
  '/* comment */',
  '1; SELECT pg_sleep(5)',
  '$1',
  '?',
];

type Res = Awaited<ReturnType<TestApp['request']>>;
type Req = Parameters<TestApp['request']>[0];
type Detail = { path: string; message: string };

function expectValidationFailed(res: Res, message: string, details?: Detail[]) {
  expect({ status: res.statusCode, type: res.headers['content-type'], body: res.json() }).toEqual({
    status: 400,
    type: JSON_TYPE,
    body: { error: details ? { code: 'VALIDATION_FAILED', message, details } : { code: 'VALIDATION_FAILED', message } },
  });
}

function json(method: string, url: string, token: string, payload: string): Req {
  return { method, url, token, headers: { 'content-type': 'application/json' }, payload };
}

describe.each(DATABASE_KINDS)('REST bad input on %s', (kind) => {
  let t: TestApp;
  let admin: TestUser;
  let adminToken: string;
  let member: TestUser;
  let memberToken: string;
  let post: { id: string };
  let tablesAtStart: string[];

  beforeAll(async () => {
    t = await startTestApp(kind);
    admin = await t.createUser('admin');
    adminToken = await admin.token();
    member = await t.createUser('member');
    memberToken = await member.token();
    const res = await t.request({ method: 'POST', url: '/v1/posts', token: memberToken, body: { title: 'Target', body: 'b', status: 'published' } });
    expect(res.statusCode).toBe(201);
    post = res.json();
    const comment = await t.request({ method: 'POST', url: `/v1/posts/${post.id}/comments`, token: memberToken, body: { body: 'A comment' } });
    expect(comment.statusCode).toBe(201);
    tablesAtStart = await tables();
  });
  afterAll(async () => {
    await t?.close();
  });

  async function tables(): Promise<string[]> {
    const rows =
      kind === 'sqlite'
        ? await sql<{ name: string }>`select name from sqlite_master where type = 'table' order by name`.execute(t.app.db.kysely)
        : await sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = 'public' order by table_name`.execute(
            t.app.db.kysely,
          );
    return rows.rows.map((r) => r.name);
  }

  /** Everything a request could change (the audit log aside, which records every decision by design). */
  async function snapshot() {
    const db = t.app.db.kysely;
    return {
      tables: await tables(),
      posts: await db.selectFrom('posts').selectAll().orderBy('id').execute(),
      users: await db.selectFrom('users').selectAll().orderBy('id').execute(),
      comments: await db.selectFrom('comments').selectAll().orderBy('id').execute(),
      clients: await db.selectFrom('clients').selectAll().orderBy('id').execute(),
      idempotencyKeys: await db.selectFrom('idempotencyKeys').selectAll().orderBy('key').execute(),
    };
  }

  /** The request is refused with 400 VALIDATION_FAILED (exactly this body) and nothing changes. */
  async function rejects(req: Req, message: string, details?: Detail[]) {
    const before = await snapshot();
    const res = await t.request(req);
    expectValidationFailed(res, message, details);
    expect(await snapshot()).toEqual(before);
  }

  /** POST a post and read it back: the stored and returned strings are exactly what was sent. */
  async function storesVerbatim(title: string, body: string) {
    const created = await t.request({ method: 'POST', url: '/v1/posts', token: memberToken, body: { title, body, status: 'published' } });
    expect(created.statusCode, JSON.stringify(title)).toBe(201);
    const value = created.json();
    expect(value.title).toBe(title);
    expect(value.body).toBe(body);
    const read = await t.request({ url: `/v1/posts/${value.id}`, token: memberToken });
    expect(read.json()).toEqual(value);
    const row = await t.app.db.kysely.selectFrom('posts').select(['title', 'body']).where('id', '=', value.id).executeTakeFirstOrThrow();
    expect(row).toEqual({ title, body });
    // A filter over the collection returns it as well, unchanged.
    const list = await t.request({ url: `/v1/posts?authorId=${member.id}&limit=100`, token: memberToken });
    expect(list.json().data).toContainEqual(value);
    return value as { id: string; title: string; body: string };
  }

  it('refuses malformed JSON, saying where the parser gave up without echoing the body', async () => {
    const bodies: [payload: string, problem: string][] = [
      ['{"title":', 'the JSON ends before it is complete'],
      ['{title:"x"}', 'not valid JSON at line 1, column 2'],
      ["{'title':'x'}", 'not valid JSON at line 1, column 2'],
      ['{"title":"a","body":"b","status":"draft",}', 'not valid JSON at line 1, column 42'],
      ['{"title":"a","body":"b","status":"draft"} x', 'not valid JSON at line 1, column 43'],
      ['nul', 'the JSON ends before it is complete'],
      ['{"title":"a\\x"}', 'not valid JSON at line 1, column 13'],
      ['{\n  "title": "a",\n  "body": "b",\n}', 'not valid JSON at line 4, column 1'],
      // The parser names no position for an unexpected token; its message (which quotes the body) is not passed on.
      ['{\n  "title": secret\n}', 'not valid JSON'],
    ];
    for (const [payload, problem] of bodies) {
      const details = [{ path: '/body', message: problem }];
      await rejects(json('POST', '/v1/posts', memberToken, payload), NOT_JSON, details);
      await rejects(json('PUT', `/v1/posts/${post.id}`, memberToken, payload), NOT_JSON, details);
      await rejects(json('POST', '/v1/users', adminToken, payload), NOT_JSON, details);
      await rejects(json('POST', `/v1/posts/${post.id}/comments`, memberToken, payload), NOT_JSON, details);
    }
  });

  it('refuses JSON that is not an object (array, string, number, null, boolean)', async () => {
    for (const payload of ['[]', '[{"title":"a","body":"b","status":"draft"}]', '"a string"', '42', 'null', 'true']) {
      await rejects(json('POST', '/v1/posts', memberToken, payload), CONTRACT_MISMATCH, [{ path: '/body', message: 'must be object' }]);
      await rejects(json('PUT', `/v1/posts/${post.id}`, memberToken, payload), CONTRACT_MISMATCH, [{ path: '/body', message: 'must be object' }]);
    }
  });

  it('refuses an empty body on POST', async () => {
    await rejects(json('POST', '/v1/posts', memberToken, ''), 'The JSON body is empty.');
    await rejects({ method: 'POST', url: '/v1/posts', token: memberToken }, CONTRACT_MISMATCH, [{ path: '/body', message: 'must be object' }]);
    await rejects({ method: 'POST', url: '/v1/posts', token: memberToken, body: {} }, CONTRACT_MISMATCH, [
      { path: '/body/title', message: 'is required' },
      { path: '/body/body', message: 'is required' },
    ]);
    await rejects({ method: 'POST', url: `/v1/posts/${post.id}/comments`, token: memberToken, body: {} }, CONTRACT_MISMATCH, [
      { path: '/body/body', message: 'is required' },
    ]);
  });

  it('takes a DELETE that says its empty body is JSON, as many HTTP helpers send it, as a DELETE without a body', async () => {
    const doomed = await t.request({ method: 'POST', url: '/v1/posts', token: memberToken, body: { title: 'Doomed', body: 'b', status: 'draft' } });
    expect(doomed.statusCode).toBe(201);
    const { id } = doomed.json() as { id: string };
    const deleted = await t.request(json('DELETE', `/v1/posts/${id}`, memberToken, ''));
    expect({ status: deleted.statusCode, body: deleted.body }).toEqual({ status: 204, body: '' });
    expect((await t.request({ url: `/v1/posts/${id}`, token: memberToken })).statusCode).toBe(404);
    // A body that is there is still read as JSON, and must be JSON.
    await rejects(json('DELETE', `/v1/posts/${post.id}`, memberToken, '{'), NOT_JSON, [{ path: '/body', message: 'not valid JSON at line 1, column 2' }]);
  });

  it('refuses wrong types without coercing them', async () => {
    const cases: [unknown, Detail[]][] = [
      [
        { title: 123, body: 'b', status: true },
        [
          { path: '/body/title', message: 'must be string' },
          { path: '/body/status', message: 'must be string' },
          { path: '/body/status', message: 'must be one of draft, published' },
        ],
      ],
      [{ title: 'a', body: null, status: 'draft' }, [{ path: '/body/body', message: 'must be string' }]],
      [
        { title: ['a'], body: 1.5, status: 'x' },
        [
          { path: '/body/title', message: 'must be string' },
          { path: '/body/body', message: 'must be string' },
          { path: '/body/status', message: 'must be one of draft, published' },
        ],
      ],
      [{ title: { text: 'a' }, body: 'b', status: 'draft' }, [{ path: '/body/title', message: 'must be string' }]],
    ];
    for (const [body, details] of cases) {
      await rejects({ method: 'POST', url: '/v1/posts', token: memberToken, body }, CONTRACT_MISMATCH, details);
      await rejects({ method: 'PUT', url: `/v1/posts/${post.id}`, token: memberToken, body }, CONTRACT_MISMATCH, details);
    }
    await rejects(
      { method: 'POST', url: '/v1/users', token: adminToken, body: { email: 'typed@example.com', name: 'n', role: 'member', password: 'long-enough-pass', active: 'true' } },
      CONTRACT_MISMATCH,
      [{ path: '/body/active', message: 'must be boolean' }],
    );
    await rejects(
      { method: 'POST', url: '/v1/users', token: adminToken, body: { email: 'typed@example.com', name: 'n', role: 'member', password: 123456789012345 } },
      CONTRACT_MISMATCH,
      [{ path: '/body/password', message: 'must be string' }],
    );
  });

  it('refuses properties outside the contract (no mass assignment)', async () => {
    for (const extra of [{ authorId: admin.id }, { id: 'chosen-id' }, { createdAt: '2000-01-01T00:00:00.000Z' }, { author: { role: 'admin' } }]) {
      const [name] = Object.keys(extra);
      await rejects({ method: 'POST', url: '/v1/posts', token: memberToken, body: { title: 'a', body: 'b', status: 'draft', ...extra } }, CONTRACT_MISMATCH, [
        { path: `/body/${name}`, message: 'is not a known property' },
      ]);
    }
    await rejects(
      { method: 'POST', url: '/v1/users', token: adminToken, body: { email: 'mass@example.com', name: 'n', role: 'member', password: 'long-enough-pass', passwordHash: 'x' } },
      CONTRACT_MISMATCH,
      [{ path: '/body/passwordHash', message: 'is not a known property' }],
    );
  });

  it('reports an unknown property name as an escaped JSON pointer within the contract limits', async () => {
    const base = { title: 'a', body: 'b', status: 'draft' };
    await rejects({ method: 'POST', url: '/v1/posts', token: memberToken, body: { ...base, 'a/b~c': 1 } }, CONTRACT_MISMATCH, [
      { path: '/body/a~1b~0c', message: 'is not a known property' },
    ]);
    await rejects({ method: 'POST', url: '/v1/posts', token: memberToken, body: { ...base, 'a\u0001b\nc': 1 } }, CONTRACT_MISMATCH, [
      { path: '/body/a\\u0001b\\u000ac', message: 'is not a known property' },
    ]);
    const long = 'k'.repeat(3000);
    await rejects({ method: 'POST', url: '/v1/posts', token: memberToken, body: { ...base, [long]: 1 } }, CONTRACT_MISMATCH, [
      { path: `/body/${long}`.slice(0, 999) + '\u2026', message: 'is not a known property' },
    ]);
  });

  it('refuses huge, fractional, negative, zero and non-finite numbers in the query', async () => {
    const url = '/v1/posts';
    const NOT_DECIMAL = 'must be a decimal number';
    const cases: [string, Detail[]][] = [
      ['limit=1e308', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=1e1', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=0x10', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=%205', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=010', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=99999999999999999999', [{ path: '/query/limit', message: 'must be <= 100' }, { path: '/query/limit', message: 'must match format "int32"' }]],
      ['limit=2147483648', [{ path: '/query/limit', message: 'must be <= 100' }, { path: '/query/limit', message: 'must match format "int32"' }]],
      ['limit=-1', [{ path: '/query/limit', message: 'must be >= 1' }]],
      ['limit=-99999999999999999999', [{ path: '/query/limit', message: 'must be >= 1' }, { path: '/query/limit', message: 'must match format "int32"' }]],
      ['limit=0', [{ path: '/query/limit', message: 'must be >= 1' }]],
      ['limit=1.5', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=abc', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=NaN', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=1&limit=2', [{ path: '/query/limit', message: 'must be integer' }]],
      ['limit=Infinity', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['limit=-Infinity', [{ path: '/query/limit', message: NOT_DECIMAL }]],
      ['page=Infinity', [{ path: '/query/page', message: NOT_DECIMAL }]],
      ['page=0', [{ path: '/query/page', message: 'must be >= 1' }]],
      ['page=-1', [{ path: '/query/page', message: 'must be >= 1' }]],
      ['page=10001', [{ path: '/query/page', message: 'must be <= 10000' }]],
      ['page=1e308', [{ path: '/query/page', message: NOT_DECIMAL }]],
    ];
    for (const [query, details] of cases) {
      await rejects({ url: `${url}?${query}`, token: memberToken }, CONTRACT_MISMATCH, details);
    }
    await rejects({ url: `/v1/users?limit=Infinity`, token: adminToken }, CONTRACT_MISMATCH, [{ path: '/query/limit', message: NOT_DECIMAL }]);
    await rejects({ url: `/v1/users/${member.id}/posts?page=-Infinity`, token: adminToken }, CONTRACT_MISMATCH, [
      { path: '/query/page', message: NOT_DECIMAL },
    ]);
    const ok = await t.request({ url: '/v1/posts?limit=5&page=2', token: memberToken });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().page.limit).toBe(5);
  });

  it('stores and returns unicode verbatim: emoji, combining marks, RTL, zero-width, astral characters at the limit', async () => {
    const astral300 = '\u{1D538}'.repeat(300); // 300 characters, 600 UTF-16 code units, 1200 UTF-8 bytes
    const samples: [string, string][] = [
      ['Emoji \u{1F600} \u{1F469}\u200D\u{1F469}\u200D\u{1F467}\u200D\u{1F466} \u{1F1FA}\u{1F1F3}', 'skin tone \u{1F44D}\u{1F3FD}'],
      ['Combining e\u0301 a\u0308 \u0915\u094D\u0937 Z\u0351\u0352\u0353', 'decomposed vs composed: \u00e9 e\u0301'],
      ['RTL \u05E9\u05DC\u05D5\u05DD \u0645\u0631\u062D\u0628\u0627', 'override \u202Egnirts desrever\u202C and \u200F marks \u200E'],
      ['Zero width a\u200Bb\u200Cc\u200Dd\uFEFFe', 'noncharacter-adjacent \uFFFD \uFFFC'],
      [astral300, `${'\u{10FFFF}'.repeat(10)}\n\ttabs and newlines are allowed in body\r\n`],
      ['CJK \u4F60\u597D \u{20000}\u{2A6D6}', 'math \u{1D400}\u{1D7FF}'],
    ];
    for (const [title, body] of samples) await storesVerbatim(title, body);

    // A full replacement with astral text at the limit is stored verbatim too.
    const target = await storesVerbatim('to replace', '');
    const put = await t.request({ method: 'PUT', url: `/v1/posts/${target.id}`, token: memberToken, body: { title: astral300, body: '\u{1F600}', status: 'draft' } });
    expect(put.statusCode).toBe(200);
    expect(put.json().title).toBe(astral300);
    expect((await t.request({ url: `/v1/posts/${target.id}`, token: memberToken })).json()).toEqual(put.json());

    // Unicode in a user's name and a comment.
    const name = 'Zo\u00eb \u{1F600} \u05E9\u05DC\u05D5\u05DD';
    const user = await t.request({ method: 'POST', url: '/v1/users', token: adminToken, body: { email: 'zoe@example.com', name, role: 'member', password: 'p\u{1F600}ssword-long-enough' } });
    expect(user.statusCode).toBe(201);
    expect(user.json().name).toBe(name);
    expect((await t.request({ url: `/v1/users/${user.json().id}`, token: adminToken })).json()).toEqual(user.json());
    const comment = await t.request({ method: 'POST', url: `/v1/posts/${post.id}/comments`, token: memberToken, body: { body: astral300 } });
    expect(comment.statusCode).toBe(201);
    expect((await t.request({ url: `/v1/comments/${comment.json().id}`, token: memberToken })).json()).toEqual(comment.json());
    expect(comment.json().body).toBe(astral300);
  });

  it('counts characters, not UTF-16 code units: 301 astral characters are one too many', async () => {
    await rejects({ method: 'POST', url: '/v1/posts', token: memberToken, body: { title: '\u{1D538}'.repeat(301), body: '', status: 'draft' } }, CONTRACT_MISMATCH, [
      { path: '/body/title', message: 'must NOT have more than 300 characters' },
    ]);
  });

  it('refuses NUL characters and unpaired surrogates in the body', async () => {
    const base = '"body":"b","status":"draft"';
    const cases: [string, string][] = [
      [`{"title":"a\\u0000b",${base}}`, '/body/title'],
      [`{"title":"\\ud800",${base}}`, '/body/title'],
      [`{"title":"x\\udc00y",${base}}`, '/body/title'],
      [`{"title":"\\udc00\\ud800",${base}}`, '/body/title'],
      ['{"title":"ok","body":"trailing high \\ud83d","status":"draft"}', '/body/body'],
      ['{"title":"ok","body":"nul \\u0000 in body","status":"draft"}', '/body/body'],
    ];
    for (const [payload, path] of cases) {
      await rejects(json('POST', '/v1/posts', memberToken, payload), NOT_UNICODE, [{ path, message: NUL_OR_SURROGATE }]);
      await rejects(json('PUT', `/v1/posts/${post.id}`, memberToken, payload), NOT_UNICODE, [{ path, message: NUL_OR_SURROGATE }]);
    }
    await rejects(json('POST', `/v1/posts/${post.id}/comments`, memberToken, '{"body":"\\ud800"}'), NOT_UNICODE, [
      { path: '/body/body', message: NUL_OR_SURROGATE },
    ]);
  });

  it('refuses NUL characters in a body property name without echoing the control character', async () => {
    await rejects(json('POST', '/v1/posts', memberToken, '{"title":"a","body":"b","status":"draft","a\\u0000b":1}'), NOT_UNICODE, [
      { path: '/body/a\\u0000b', message: NUL_OR_SURROGATE },
    ]);
  });

  it('refuses NUL characters in query parameters', async () => {
    await rejects({ url: '/v1/posts?authorId=%00', token: memberToken }, NOT_UNICODE, [{ path: '/query/authorId', message: NUL_OR_SURROGATE }]);
    await rejects({ url: '/v1/posts?status=draft%00', token: memberToken }, NOT_UNICODE, [{ path: '/query/status', message: NUL_OR_SURROGATE }]);
  });

  it('refuses __proto__ and constructor.prototype keys, and nothing is polluted', async () => {
    const payloads = [
      '{"title":"a","body":"b","status":"draft","__proto__":{"polluted":"yes"}}',
      '{"__proto__":{"polluted":"yes"},"title":"a","body":"b","status":"draft"}',
      '{"title":"a","body":"b","status":"draft","constructor":{"prototype":{"polluted":"yes"}}}',
      '{"title":"a","body":"b","status":"draft","x":{"__proto__":{"polluted":"yes"}}}',
      '{"title":"a","body":"b","status":"draft","x":[{"constructor":{"prototype":{"polluted":"yes"}}}]}',
    ];
    for (const payload of payloads) {
      await rejects(json('POST', '/v1/posts', memberToken, payload), POISONING);
      await rejects(json('PUT', `/v1/posts/${post.id}`, memberToken, payload), POISONING);
      await rejects(json('POST', '/v1/users', adminToken, payload), POISONING);
    }
    // Harmless look-alikes are plain unknown properties.
    await rejects(json('POST', '/v1/posts', memberToken, '{"title":"a","body":"b","status":"draft","constructor":{}}'), CONTRACT_MISMATCH, [
      { path: '/body/constructor', message: 'is not a known property' },
    ]);
    await rejects(json('POST', '/v1/posts', memberToken, '{"title":"a","body":"b","status":"draft","prototype":{"polluted":"yes"}}'), CONTRACT_MISMATCH, [
      { path: '/body/prototype', message: 'is not a known property' },
    ]);
    for (const query of ['__proto__=x', '__proto__[polluted]=yes', 'constructor[prototype][polluted]=yes', 'constructor=x']) {
      const name = decodeURIComponent(query.split('=')[0]!);
      await rejects({ url: `/v1/posts?${query}`, token: memberToken }, CONTRACT_MISMATCH, [{ path: `/query/${name}`, message: 'is not a known property' }]);
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
    expect((Object as unknown as Record<string, unknown>).polluted).toBeUndefined();
    // The server still works normally afterwards.
    expect((await t.request({ url: `/v1/posts/${post.id}`, token: memberToken })).statusCode).toBe(200);
  });

  it('stores SQL metacharacters verbatim in every string field', async () => {
    for (const value of SQL_META) {
      await storesVerbatim(value, `${value}\n${value}`);
      const comment = await t.request({ method: 'POST', url: `/v1/posts/${post.id}/comments`, token: memberToken, body: { body: value } });
      expect(comment.statusCode).toBe(201);
      expect(comment.json().body).toBe(value);
      expect((await t.request({ url: `/v1/comments/${comment.json().id}`, token: memberToken })).json()).toEqual(comment.json());
      const user = await t.request({
        method: 'POST',
        url: '/v1/users',
        token: adminToken,
        body: { email: `sql-${SQL_META.indexOf(value)}@example.com`, name: value, role: 'member', password: `${value}-padding-to-12` },
      });
      expect(user.statusCode).toBe(201);
      expect(user.json().name).toBe(value);
      expect((await t.request({ url: `/v1/users/${user.json().id}`, token: adminToken })).json()).toEqual(user.json());
    }
    // Email addresses: the characters the email format admits are stored verbatim, the others are refused.
    const email = "o'neil%_x=y@example.com";
    const ok = await t.request({ method: 'POST', url: '/v1/users', token: adminToken, body: { email, name: 'E', role: 'member', password: 'long-enough-pass' } });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().email).toBe(email);
    for (const bad of ['"; DROP TABLE users; --"@example.com', "x' OR 1=1 --@example.com", 'a\\b@example.com']) {
      await rejects({ method: 'POST', url: '/v1/users', token: adminToken, body: { email: bad, name: 'E', role: 'member', password: 'long-enough-pass' } }, CONTRACT_MISMATCH, [
        { path: '/body/email', message: 'must match format "email"' },
      ]);
    }
    expect(await tables()).toEqual(tablesAtStart);
    // Creates a user per value: each password is hashed with scrypt (memory-hard by design, ~0.3–1 s).
  }, 90_000);

  it('treats SQL metacharacters in filters, cursors and path parameters as data: 400 or an exact match, tables intact', async () => {
    const before = await snapshot();
    for (const value of SQL_META) {
      const q = encodeURIComponent(value);
      const idLike = /^[A-Za-z0-9_-]+$/.test(value);

      const status = await t.request({ url: `/v1/posts?status=${q}`, token: memberToken });
      expectValidationFailed(status, CONTRACT_MISMATCH, [{ path: '/query/status', message: 'must be one of draft, published' }]);
      const role = await t.request({ url: `/v1/users?role=${q}`, token: adminToken });
      expectValidationFailed(role, CONTRACT_MISMATCH, [{ path: '/query/role', message: 'must be one of admin, editor, member' }]);
      const active = await t.request({ url: `/v1/users?active=${q}`, token: adminToken });
      expectValidationFailed(active, CONTRACT_MISMATCH, [{ path: '/query/active', message: 'must be boolean' }]);
      const expand = await t.request({ url: `/v1/posts?expand=${q}`, token: memberToken });
      expectValidationFailed(expand, CONTRACT_MISMATCH, [{ path: '/query/expand/0', message: 'must be one of author' }]);

      const author = await t.request({ url: `/v1/posts?authorId=${q}`, token: memberToken });
      const one = await t.request({ url: `/v1/posts/${q}`, token: memberToken });
      const userPosts = await t.request({ url: `/v1/users/${q}/posts`, token: adminToken });
      const user = await t.request({ url: `/v1/users/${q}`, token: adminToken });
      const comment = await t.request({ url: `/v1/comments/${q}`, token: adminToken });
      const comments = await t.request({ url: `/v1/posts/${q}/comments`, token: adminToken });
      const notFound = { error: { code: 'NOT_FOUND', message: 'The resource does not exist.' } };
      if (idLike) {
        // A well-formed id that matches nothing: an exact comparison, not a pattern.
        expect(author.json()).toEqual({ data: [], page: { limit: 20, next: null } });
        for (const res of [one, user, userPosts, comment, comments]) expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 404, body: notFound });
      } else {
        expectValidationFailed(author, CONTRACT_MISMATCH, [{ path: '/query/authorId', message: ID_PATTERN }]);
        expectValidationFailed(one, CONTRACT_MISMATCH, [{ path: '/path/postId', message: ID_PATTERN }]);
        expectValidationFailed(userPosts, CONTRACT_MISMATCH, [{ path: '/path/userId', message: ID_PATTERN }]);
        expectValidationFailed(user, CONTRACT_MISMATCH, [{ path: '/path/userId', message: ID_PATTERN }]);
        expectValidationFailed(comment, CONTRACT_MISMATCH, [{ path: '/path/commentId', message: ID_PATTERN }]);
        expectValidationFailed(comments, CONTRACT_MISMATCH, [{ path: '/path/postId', message: ID_PATTERN }]);
      }

      // A cursor is opaque: metacharacters in it, raw or wrapped in a well-formed cursor, are refused.
      const cursor = Buffer.from(JSON.stringify([1, value])).toString('base64url');
      const forged = await t.request({ url: `/v1/posts?after=${cursor}`, token: memberToken });
      if (idLike) {
        expect(forged.statusCode).toBe(200);
      } else {
        expectValidationFailed(forged, 'The cursor is not valid.', [{ path: '/query/after', message: 'is not a cursor from this API' }]);
      }
      const raw = await t.request({ url: `/v1/posts?after=${q}`, token: memberToken });
      if (/^[A-Za-z0-9._~-]+$/.test(value)) {
        expectValidationFailed(raw, 'The cursor is not valid.', [{ path: '/query/after', message: 'is not a cursor from this API' }]);
      } else {
        expectValidationFailed(raw, CONTRACT_MISMATCH, [{ path: '/query/after', message: 'must match pattern "^[A-Za-z0-9._~-]+$"' }]);
      }

      // Writes addressed by such an id change nothing.
      const put = await t.request({ method: 'PUT', url: `/v1/posts/${q}`, token: memberToken, body: { title: 'x', body: 'y', status: 'draft' } });
      const del = await t.request({ method: 'DELETE', url: `/v1/posts/${q}`, token: memberToken });
      for (const res of [put, del]) {
        if (idLike) expect(res.json()).toEqual({ error: { code: 'NOT_FOUND', message: 'The resource does not exist.' } });
        else expectValidationFailed(res, CONTRACT_MISMATCH, [{ path: '/path/postId', message: ID_PATTERN }]);
      }
    }
    expect(await snapshot()).toEqual(before);
    expect(await tables()).toEqual(tablesAtStart);
  });

  it('treats SQL metacharacters in the Idempotency-Key as an opaque key', async () => {
    const key = `';DROP-TABLE-posts;--%_\\`;
    const body = { title: 'Keyed', body: '', status: 'draft' };
    const first = await t.request({ method: 'POST', url: '/v1/posts', token: memberToken, headers: { 'idempotency-key': key }, body });
    expect(first.statusCode).toBe(201);
    const replay = await t.request({ method: 'POST', url: '/v1/posts', token: memberToken, headers: { 'idempotency-key': key }, body });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual(first.json());
    // A key that differs only by a LIKE wildcard is another key.
    const other = await t.request({ method: 'POST', url: '/v1/posts', token: memberToken, headers: { 'idempotency-key': key.replace('%', '_') }, body });
    expect(other.statusCode).toBe(201);
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(other.json().id).not.toBe(first.json().id);
    await rejects({ method: 'POST', url: '/v1/posts', token: memberToken, headers: { 'idempotency-key': "' OR 1=1 --" }, body }, CONTRACT_MISMATCH, [
      { path: '/headers/idempotency-key', message: 'must match pattern "^[!-~]+$"' },
    ]);
    expect(await tables()).toEqual(tablesAtStart);
  });

  it('refuses over-long strings in the body', async () => {
    const cases: [Req, Detail[]][] = [
      [{ method: 'POST', url: '/v1/posts', token: memberToken, body: { title: 't'.repeat(301), body: '', status: 'draft' } }, [{ path: '/body/title', message: 'must NOT have more than 300 characters' }]],
      [{ method: 'POST', url: '/v1/posts', token: memberToken, body: { title: 't', body: 'b'.repeat(20001), status: 'draft' } }, [{ path: '/body/body', message: 'must NOT have more than 20000 characters' }]],
      [{ method: 'PUT', url: `/v1/posts/${post.id}`, token: memberToken, body: { title: 't'.repeat(301), body: '', status: 'draft' } }, [{ path: '/body/title', message: 'must NOT have more than 300 characters' }]],
      [{ method: 'POST', url: '/v1/posts', token: memberToken, body: { title: '', body: '', status: 'draft' } }, [{ path: '/body/title', message: 'must NOT have fewer than 1 characters' }]],
      [{ method: 'POST', url: `/v1/posts/${post.id}/comments`, token: memberToken, body: { body: 'c'.repeat(5001) } }, [{ path: '/body/body', message: 'must NOT have more than 5000 characters' }]],
      [{ method: 'POST', url: `/v1/posts/${post.id}/comments`, token: memberToken, body: { body: '' } }, [{ path: '/body/body', message: 'must NOT have fewer than 1 characters' }]],
      [
        { method: 'POST', url: '/v1/users', token: adminToken, body: { email: 'long@example.com', name: 'n'.repeat(201), role: 'member', password: 'p'.repeat(257) } },
        [
          { path: '/body/name', message: 'must NOT have more than 200 characters' },
          { path: '/body/password', message: 'must NOT have more than 256 characters' },
        ],
      ],
      [
        { method: 'POST', url: '/v1/users', token: adminToken, body: { email: `${'a'.repeat(250)}@example.com`, name: 'n', role: 'member', password: 'long-enough-pass' } },
        [{ path: '/body/email', message: 'must NOT have more than 254 characters' }],
      ],
      [
        { method: 'POST', url: '/v1/users', token: adminToken, body: { email: 'short@example.com', name: 'n', role: 'member', password: 'short' } },
        [{ path: '/body/password', message: 'must NOT have fewer than 12 characters' }],
      ],
    ];
    for (const [req, details] of cases) await rejects(req, CONTRACT_MISMATCH, details);
  });

  it('refuses over-long query and path parameters', async () => {
    await rejects({ url: `/v1/posts?after=${'a'.repeat(513)}`, token: memberToken }, CONTRACT_MISMATCH, [
      { path: '/query/after', message: 'must NOT have more than 512 characters' },
    ]);
    await rejects({ url: `/v1/posts?authorId=${'a'.repeat(65)}`, token: memberToken }, CONTRACT_MISMATCH, [
      { path: '/query/authorId', message: 'must NOT have more than 64 characters' },
    ]);
    await rejects({ url: `/v1/posts/${'a'.repeat(65)}`, token: memberToken }, CONTRACT_MISMATCH, [
      { path: '/path/postId', message: 'must NOT have more than 64 characters' },
    ]);
    await rejects({ method: 'DELETE', url: `/v1/posts/${'a'.repeat(65)}`, token: memberToken }, CONTRACT_MISMATCH, [
      { path: '/path/postId', message: 'must NOT have more than 64 characters' },
    ]);
  });

  it('answers a path parameter longer than the router accepts in the error shape', async () => {
    const before = await snapshot();
    for (const method of ['GET', 'DELETE']) {
      const res = await t.request({ method, url: `/v1/posts/${'a'.repeat(300)}`, token: memberToken });
      const body = res.json();
      expect({ status: res.statusCode, type: res.headers['content-type'], body }).toEqual({
        status: 400,
        type: JSON_TYPE,
        body: { error: { code: 'VALIDATION_FAILED', message: expect.any(String), ...(body.error?.details ? { details: [{ path: '/path/postId', message: expect.any(String) }] } : {}) } },
      });
    }
    expect(await snapshot()).toEqual(before);
  });

  it('answers a path that is not valid percent-encoded UTF-8 in the error shape', async () => {
    for (const url of ['/v1/posts/%ED%A0%80', '/v1/posts/%E0%A4%A', '/v1/posts/%ZZ']) {
      const res = await t.request({ url, token: memberToken });
      expect({ status: res.statusCode, type: res.headers['content-type'], body: res.json() }, url).toEqual({
        status: 400,
        type: JSON_TYPE,
        body: { error: { code: 'VALIDATION_FAILED', message: expect.any(String) } },
      });
    }
  });
});
