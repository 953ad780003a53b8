import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const ID = /^[0-9a-f]{32}$/;

type Res = Awaited<ReturnType<TestApp['request']>>;

describe.each(DATABASE_KINDS)('Idempotency-Key on POST on %s', (kind) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp(kind);
  });
  afterAll(async () => {
    await t?.close();
  });

  function post(token: string, key: string | undefined, body: unknown): Promise<Res> {
    return t.request({ method: 'POST', url: '/v1/posts', token, headers: key === undefined ? {} : { 'idempotency-key': key }, body });
  }

  async function postsBy(user: TestUser) {
    return t.app.db.kysely.selectFrom('posts').selectAll().where('authorId', '=', user.id).orderBy('id').execute();
  }

  it('replays the first response for the same key and body, with Idempotent-Replayed, and creates one post', async () => {
    const user = await t.createUser('member');
    const token = await user.token();
    const body = { title: 'Once', body: 'only once', status: 'published' };

    const first = await post(token, 'key-1', body);
    expect(first.statusCode).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const created = first.json();
    expect(created).toEqual({
      id: expect.stringMatching(ID),
      authorId: user.id,
      title: 'Once',
      body: 'only once',
      status: 'published',
      createdAt: expect.any(String),
      updatedAt: created.createdAt,
    });
    expect(first.headers.location).toBe(`/v1/posts/${created.id}`);

    for (let i = 0; i < 2; i++) {
      const again = await post(token, 'key-1', body);
      expect({
        status: again.statusCode,
        type: again.headers['content-type'],
        location: again.headers.location,
        replayed: again.headers['idempotent-replayed'],
        body: again.json(),
      }).toEqual({ status: 201, type: JSON_TYPE, location: first.headers.location, replayed: 'true', body: created });
    }
    expect(await postsBy(user)).toHaveLength(1);

    // The same body without a key is an ordinary, non-idempotent create.
    const unkeyed = await post(token, undefined, body);
    expect(unkeyed.statusCode).toBe(201);
    expect(unkeyed.json().id).not.toBe(created.id);
    expect(await postsBy(user)).toHaveLength(2);
  });

  it('answers the same key with a different body with 422 IDEMPOTENCY_KEY_REUSED and creates nothing', async () => {
    const user = await t.createUser('member');
    const token = await user.token();
    const first = await post(token, 'key-2', { title: 'A', body: 'a', status: 'draft' });
    expect(first.statusCode).toBe(201);
    const before = await postsBy(user);

    for (const other of [
      { title: 'A', body: 'b', status: 'draft' },
      { title: 'A', body: 'a', status: 'published' },
    ]) {
      const res = await post(token, 'key-2', other);
      expect({ status: res.statusCode, type: res.headers['content-type'], replayed: res.headers['idempotent-replayed'], body: res.json() }).toEqual({
        status: 422,
        type: JSON_TYPE,
        replayed: undefined,
        body: { error: { code: 'IDEMPOTENCY_KEY_REUSED', message: 'The idempotency key was used with a different request.' } },
      });
    }
    expect(await postsBy(user)).toEqual(before);

    // The key still replays its own request.
    const replay = await post(token, 'key-2', { title: 'A', body: 'a', status: 'draft' });
    expect(replay.statusCode).toBe(201);
    expect(replay.json()).toEqual(first.json());
  });

  it('scopes keys to the caller: two users with the same key do not collide', async () => {
    const alice = await t.createUser('member');
    const bob = await t.createUser('member');
    const body = { title: 'Shared key', body: '', status: 'draft' };
    const a = await post(await alice.token(), 'shared-key', body);
    const b = await post(await bob.token(), 'shared-key', body);
    expect(a.statusCode).toBe(201);
    expect(b.statusCode).toBe(201);
    expect(a.headers['idempotent-replayed']).toBeUndefined();
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect(a.json().authorId).toBe(alice.id);
    expect(b.json().authorId).toBe(bob.id);
    expect(a.json().id).not.toBe(b.json().id);
    expect(await postsBy(alice)).toHaveLength(1);
    expect(await postsBy(bob)).toHaveLength(1);

    // And a different body from the second user is not a "reuse" of the first user's key.
    const carol = await t.createUser('member');
    const c = await post(await carol.token(), 'shared-key', { ...body, title: 'Other' });
    expect(c.statusCode).toBe(201);
  });

  it('never answers a client registered again under a deleted client_id with its predecessor\'s stored response', async () => {
    const admin = await t.adminClientToken();
    const register = async () => {
      const res = await t.request({
        method: 'POST',
        url: '/v1/clients',
        token: admin,
        body: { clientId: 'reused-client', name: 'Reused', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts', 'write:posts'], role: 'member' },
      });
      expect(res.statusCode, res.body).toBe(201);
      const { id, clientSecret } = res.json() as { id: string; clientSecret: string };
      const token = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`reused-client:${clientSecret}`).toString('base64')}` },
        payload: 'grant_type=client_credentials',
      });
      expect(token.statusCode, token.body).toBe(200);
      return { id, token: (JSON.parse(token.body) as { access_token: string }).access_token };
    };
    const body = { title: 'Keyed', body: 'by a client', status: 'draft' };
    const old = await register();
    const first = await post(old.token, 'client-key', body);
    expect(first.statusCode, first.body).toBe(201);
    expect((await t.request({ method: 'DELETE', url: `/v1/clients/${old.id}`, token: admin })).statusCode).toBe(204);

    const second = await post((await register()).token, 'client-key', body);
    expect(second.statusCode, second.body).toBe(201);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(second.json().id).not.toBe(first.json().id);
    expect(second.json().authorId).not.toBe(first.json().authorId);
  });

  it('does not burn the key when the first request fails validation', async () => {
    const user = await t.createUser('member');
    const token = await user.token();
    const invalid = await post(token, 'key-3', { title: '', body: 'x', status: 'draft' });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json()).toEqual({
      error: {
        code: 'VALIDATION_FAILED',
        message: 'The request does not match the contract.',
        details: [{ path: '/body/title', message: 'must NOT have fewer than 1 characters' }],
      },
    });
    expect(await postsBy(user)).toHaveLength(0);

    const valid = await post(token, 'key-3', { title: 'Now valid', body: 'x', status: 'draft' });
    expect(valid.statusCode).toBe(201);
    expect(valid.headers['idempotent-replayed']).toBeUndefined();
    const replay = await post(token, 'key-3', { title: 'Now valid', body: 'x', status: 'draft' });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.json()).toEqual(valid.json());
    expect(await postsBy(user)).toHaveLength(1);
  });

  it('does not burn the key when the first request is refused before it runs (scope, media type)', async () => {
    const user = await t.createUser('member');
    const readOnly = await user.token(['read:posts']);
    const token = await user.token();
    const body = { title: 'Later', body: '', status: 'draft' };
    expect((await post(readOnly, 'key-4', body)).statusCode).toBe(403);
    const textPlain = await t.request({
      method: 'POST',
      url: '/v1/posts',
      token,
      headers: { 'idempotency-key': 'key-4', 'content-type': 'text/plain' },
      payload: JSON.stringify(body),
    });
    expect(textPlain.statusCode).toBe(415);
    const ok = await post(token, 'key-4', body);
    expect(ok.statusCode).toBe(201);
    expect(ok.headers['idempotent-replayed']).toBeUndefined();
  });

  it('makes a retried user creation safe: the replay is the 201, not a 409 for the duplicate email', async () => {
    const admin = await t.createUser('admin');
    const token = await admin.token();
    const body = { email: `idem-${Date.now()}@example.com`, name: 'Idem', role: 'member', password: 'a-long-enough-password' };
    const first = await t.request({ method: 'POST', url: '/v1/users', token, headers: { 'idempotency-key': 'user-key' }, body });
    expect(first.statusCode).toBe(201);
    const again = await t.request({ method: 'POST', url: '/v1/users', token, headers: { 'idempotency-key': 'user-key' }, body });
    expect({ status: again.statusCode, replayed: again.headers['idempotent-replayed'], location: again.headers.location, body: again.json() }).toEqual({
      status: 201,
      replayed: 'true',
      location: first.headers.location,
      body: first.json(),
    });
    expect(again.body).not.toMatch(/password/i);
    const rows = await t.app.db.kysely.selectFrom('users').select('id').where('email', '=', body.email).execute();
    expect(rows).toHaveLength(1);
  });

  it('never stores a client secret: a replayed client creation answers the same 201 without it', async () => {
    const token = await t.adminClientToken();
    const body = { name: 'Idempotent service', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member' };
    const first = await t.request({ method: 'POST', url: '/v1/clients', token, headers: { 'idempotency-key': 'client-key' }, body });
    expect(first.statusCode, first.body).toBe(201);
    const secret = first.json().clientSecret as string;
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43,}$/);
    // What the database keeps for the replay: the response without the secret.
    const stored = await t.app.db.kysely.selectFrom('idempotencyKeys').selectAll().where('key', '=', 'client-key').executeTakeFirstOrThrow();
    expect(JSON.stringify(stored)).not.toContain(secret);
    const again = await t.request({ method: 'POST', url: '/v1/clients', token, headers: { 'idempotency-key': 'client-key' }, body });
    const { clientSecret: _shownOnce, ...withoutSecret } = first.json();
    expect({ status: again.statusCode, replayed: again.headers['idempotent-replayed'], location: again.headers.location, body: again.json() }).toEqual({
      status: 201,
      replayed: 'true',
      location: first.headers.location,
      body: withoutSecret,
    });
    expect(again.body).not.toContain(secret);
    expect(await t.app.db.kysely.selectFrom('clients').select('id').where('name', '=', body.name).execute()).toHaveLength(1);
  });

  it('keys the stored request fingerprint, so a password in a body cannot be guessed from the table', async () => {
    const token = await t.adminClientToken();
    const body = { email: `fp-${Date.now()}@example.com`, name: 'Fingerprinted', role: 'member', password: 'Summer2026!!-guessable' };
    const res = await t.request({ method: 'POST', url: '/v1/users', token, headers: { 'idempotency-key': 'fp-key' }, body });
    expect(res.statusCode).toBe(201);
    const stored = await t.app.db.kysely.selectFrom('idempotencyKeys').select(['requestHash', 'body']).where('key', '=', 'fp-key').executeTakeFirstOrThrow();
    // What an attacker reading the table would try: the unkeyed digest of the body as the server saw it.
    const seen = { ...body, active: true };
    const guesses = [body, seen].map((b) => createHash('sha256').update(`createUser\n/v1/users\n${JSON.stringify(b)}`).digest('hex'));
    expect(guesses).not.toContain(stored.requestHash);
    expect(stored.requestHash).toMatch(/^[0-9a-f]{64}$/);
    expect(stored.body).not.toContain(body.password);
  });

  it('creates one post when the same keyed request arrives twice at once', async () => {
    const user = await t.createUser('member');
    const token = await user.token();
    const body = { title: 'Race', body: '', status: 'draft' };
    const results = await Promise.all([post(token, 'race-key', body), post(token, 'race-key', body), post(token, 'race-key', body)]);
    const created = results.filter((r) => r.statusCode === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    const ids = new Set(created.map((r) => r.json().id));
    expect(ids.size).toBe(1);
    for (const r of results) {
      if (r.statusCode === 201) continue;
      expect({ status: r.statusCode, body: r.json() }).toEqual({
        status: 409,
        body: { error: { code: 'CONFLICT', message: 'A request with this Idempotency-Key is still being processed.' } },
      });
    }
    expect(await postsBy(user)).toHaveLength(1);
  });

  it('rejects a malformed Idempotency-Key with 400', async () => {
    const user = await t.createUser('member');
    const token = await user.token();
    for (const [key, message] of [
      ['has space', 'must match pattern "^[!-~]+$"'],
      ['x'.repeat(256), 'must NOT have more than 255 characters'],
    ] as const) {
      const res = await post(token, key, { title: 'K', body: '', status: 'draft' });
      expect({ status: res.statusCode, body: res.json() }).toEqual({
        status: 400,
        body: {
          error: {
            code: 'VALIDATION_FAILED',
            message: 'The request does not match the contract.',
            details: [{ path: '/headers/idempotency-key', message }],
          },
        },
      });
    }
    expect(await postsBy(user)).toHaveLength(0);
  });
});
