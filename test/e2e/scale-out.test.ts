import { createClient, type Client } from 'graphql-ws';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/cli-process.js';
import { createTestDatabase, isPostgresAvailable, type TestDatabase } from '../helpers/databases.js';
import { PrivateRedis, REDIS_AVAILABLE } from '../helpers/redis.js';
import { freePort, startServer, waitUntilLive, type Running } from '../helpers/server-process.js';
import { overSocket, SignInBrowser } from '../helpers/sign-in-browser.js';

// Two server processes on one PostgreSQL database and one Redis, as operators run them behind a load
// balancer: what one issues, the other accepts; what one revokes, the other refuses within a second (through
// Redis, and through the database's invalidation sequence while Redis is down); rate-limit counters and
// subscription events are shared; races between them produce one winner.

const POSTGRES = await isPostgresAvailable();
const PROPAGATION_MS = 1000;
const RATE_LIMIT = 60;
const PASSWORD = 'correct horse battery staple 42';
const ISSUER = 'http://127.0.0.1:8080';

interface Instance {
  server: Running;
  metricsPort: number;
}

async function form(base: string, url: string, fields: Record<string, string>, auth?: [string, string]): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}${url}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(auth ? { authorization: `Basic ${Buffer.from(`${encodeURIComponent(auth[0])}:${encodeURIComponent(auth[1])}`).toString('base64')}` } : {}),
    },
    body: new URLSearchParams(fields),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function api(base: string, token: string, method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : null };
}

/** Asks every 50 ms from the moment the change was made; fails unless `url` answers 401 within PROPAGATION_MS. */
async function expectRefusedWithin(base: string, token: string, url = '/v1/posts'): Promise<number> {
  const start = Date.now();
  let status = (await api(base, token, 'GET', url)).status;
  while (status !== 401 && Date.now() - start < PROPAGATION_MS) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    status = (await api(base, token, 'GET', url)).status;
  }
  const elapsed = Date.now() - start;
  expect({ status, withinMs: PROPAGATION_MS }).toEqual({ status: 401, withinMs: PROPAGATION_MS });
  return elapsed;
}

async function noticesReceived(instance: Instance): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${instance.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('portcullis_invalidation_notices_total{direction="received"}'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

describe.skipIf(!POSTGRES || !REDIS_AVAILABLE)('two instances on one PostgreSQL and one Redis', { timeout: 60_000 }, () => {
  let database: TestDatabase;
  let redis: PrivateRedis;
  let a: Instance;
  let b: Instance;
  let admin: [string, string];
  let adminToken: string;
  let cliEnv: Record<string, string>;
  const sockets: Client[] = [];

  async function start(): Promise<Instance> {
    const metricsPort = await freePort();
    const server = await startServer({
      DATABASE_URL: database.url!,
      REDIS_URL: redis.url,
      // The address clients know them by (the load balancer's): both issue and accept tokens for it.
      ISSUER,
      METRICS_PORT: String(metricsPort),
      OAUTH_PASSWORD_GRANT: 'enabled',
      RATE_LIMIT_MAX: String(RATE_LIMIT),
      RATE_LIMIT_ANONYMOUS_MAX: '100000',
      RATE_LIMIT_ADDRESS_MAX: '100000',
    }, undefined, { forSuite: true });
    await waitUntilLive(server);
    return { server, metricsPort };
  }

  async function clientToken(base: string, credentials: [string, string], scope = 'read:posts write:posts'): Promise<string> {
    const res = await form(base, '/oauth/token', { grant_type: 'client_credentials', scope }, credentials);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return String(res.body.access_token);
  }

  async function cli(args: string[]): Promise<Record<string, unknown>> {
    const result = await runCli([...args, '--json'], cliEnv);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    return JSON.parse(result.stdout) as Record<string, unknown>;
  }

  async function newServiceClient(name: string): Promise<[string, string]> {
    const created = await cli(['clients', 'create', '--name', name, '--type', 'confidential', '--grant', 'client_credentials', '--role', 'editor', '--scope', 'read:posts', '--scope', 'write:posts']);
    return [String(created.clientId), String(created.clientSecret)];
  }

  function subscribe(instance: Instance, token: string): { events: unknown[]; ready: Promise<void> } {
    const events: unknown[] = [];
    const client = createClient({
      url: `${instance.server.base.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${token}` },
      lazy: false,
      retryAttempts: 0,
      onNonLazyError: () => {},
    });
    sockets.push(client);
    let acknowledged!: () => void;
    const ready = new Promise<void>((resolve) => (acknowledged = resolve));
    client.on('connected', () => acknowledged());
    client.subscribe({ query: 'subscription { postPublished { id title } }' }, { next: (result) => events.push(result), error: () => {}, complete: () => {} });
    return { events, ready };
  }

  beforeAll(async () => {
    database = await createTestDatabase('postgres', { migrate: false });
    redis = await PrivateRedis.start();
    cliEnv = { DATABASE_URL: database.url! };
    // The first instance creates the schema and the bootstrap admin; the second joins an existing database.
    a = await start();
    b = await start();
    const bootstrap = JSON.parse(fs.readFileSync(path.join(a.server.dataDir, 'bootstrap.json'), 'utf8')) as { clients: { admin: { client_id: string; client_secret: string } } };
    admin = [bootstrap.clients.admin.client_id, bootstrap.clients.admin.client_secret];
    adminToken = await clientToken(a.server.base, admin, 'read:users write:users read:clients write:clients read:posts write:posts');
  }, 60_000);

  afterAll(async () => {
    for (const client of sockets) await client.dispose();
    await redis?.stop();
    await database?.drop();
  });

  it('accepts on one instance a token the other issued, and refuses it on both within a second of its revocation on one', async () => {
    const service = await newServiceClient('Shared');
    const token = await clientToken(a.server.base, service);
    // Verified and cached by both.
    for (const instance of [a, b, a, b]) expect((await api(instance.server.base, token, 'GET', '/v1/posts')).status).toBe(200);
    const before = await noticesReceived(b);
    const revoked = await form(a.server.base, '/oauth/revoke', { token }, service);
    expect(revoked.status).toBe(200);
    await expectRefusedWithin(b.server.base, token);
    await expectRefusedWithin(a.server.base, token);
    // B heard of it through Redis, not only from its next read of the sequence.
    await expect.poll(() => noticesReceived(b), { timeout: PROPAGATION_MS, interval: 50 }).toBeGreaterThan(before);
  });

  it("ends on the other instance within a second a user's tokens when the user is deactivated, and a client's when it is deleted", async () => {
    const user = await cli(['users', 'create', '--email', 'shared.user@example.com', '--name', 'Shared', '--role', 'member', '--password', PASSWORD]);
    const legacy = await cli(['clients', 'create', '--name', 'Legacy', '--type', 'confidential', '--grant', 'password', '--scope', 'read:posts', '--legacy']);
    const credentials: [string, string] = [String(legacy.clientId), String(legacy.clientSecret)];
    const granted = await form(a.server.base, '/oauth/token', { grant_type: 'password', username: 'shared.user@example.com', password: PASSWORD, scope: 'read:posts' }, credentials);
    expect(granted.status, JSON.stringify(granted.body)).toBe(200);
    const userToken = String(granted.body.access_token);
    expect((await api(b.server.base, userToken, 'GET', '/v1/posts')).status).toBe(200);
    const deactivated = await api(a.server.base, adminToken, 'PATCH', `/v1/users/${(user.user as { id: string }).id}`, { active: false }, { 'content-type': 'application/merge-patch+json' });
    expect(deactivated.status, JSON.stringify(deactivated.body)).toBe(200);
    await expectRefusedWithin(b.server.base, userToken);

    const doomed = await newServiceClient('Doomed');
    const doomedToken = await clientToken(b.server.base, doomed);
    expect((await api(b.server.base, doomedToken, 'GET', '/v1/posts')).status).toBe(200);
    const listed = await api(a.server.base, adminToken, 'GET', `/v1/clients?limit=100`);
    const registration = (listed.body!.data as { id: string; clientId: string }[]).find((c) => c.clientId === doomed[0])!;
    expect((await api(a.server.base, adminToken, 'DELETE', `/v1/clients/${registration.id}`)).status).toBe(204);
    await expectRefusedWithin(b.server.base, doomedToken);
  });

  it("shares rate-limit counters: a client's budget is spent across both instances", async () => {
    const service = await newServiceClient('Limited');
    const token = await clientToken(a.server.base, service, 'read:posts');
    const statuses: number[] = [];
    let last: Awaited<ReturnType<typeof api>> | null = null;
    for (let i = 0; i < RATE_LIMIT; i++) {
      last = await api((i % 2 === 0 ? a : b).server.base, token, 'GET', '/v1/posts?limit=1');
      statuses.push(last.status);
    }
    expect(statuses.every((status) => status === 200)).toBe(true);
    expect(last!.headers.get('ratelimit')).toMatch(/^"client";r=0;t=\d+$/);
    for (const instance of [a, b]) {
      const refused = await api(instance.server.base, token, 'GET', '/v1/posts?limit=1');
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ error: { code: 'RATE_LIMITED', message: expect.stringMatching(/^Too many requests; retry in \d+ s\.$/) } });
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    }
  });

  it('delivers a post published through one instance to subscribers on the other', async () => {
    const reader = await clientToken(b.server.base, admin, 'read:posts');
    const subscriber = subscribe(b, reader);
    await subscriber.ready;
    await new Promise((resolve) => setTimeout(resolve, 300));
    const created = await api(a.server.base, adminToken, 'POST', '/v1/posts', { title: 'Across instances', body: 'text', status: 'published' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await expect.poll(() => subscriber.events, { timeout: 2000, interval: 20 }).toEqual([{ data: { postPublished: { id: created.body!.id, title: 'Across instances' } } }]);
  });

  it('creates one resource for two concurrent POSTs with one Idempotency-Key sent to the two instances', async () => {
    const key = `race-${Date.now()}`;
    const body = { title: 'Raced', body: 'text', status: 'draft' };
    const answers = await Promise.all([a, b, a, b].map((instance) => api(instance.server.base, adminToken, 'POST', '/v1/posts', body, { 'idempotency-key': key })));
    const created = answers.filter((answer) => answer.status === 201);
    expect(created.length).toBeGreaterThanOrEqual(1);
    for (const answer of answers.filter((x) => x.status !== 201)) expect(answer.body).toMatchObject({ error: { code: 'CONFLICT' } });
    expect(new Set(created.map((answer) => answer.body!.id)).size).toBe(1);
    const listed = await api(b.server.base, adminToken, 'GET', '/v1/posts?limit=100');
    expect((listed.body!.data as { title: string }[]).filter((post) => post.title === 'Raced')).toHaveLength(1);
  });

  it('answers one of two concurrent refreshes of one token at the two instances, and revokes the family, winner included', async () => {
    await cli(['users', 'create', '--email', 'refresh.user@example.com', '--name', 'Refresh', '--role', 'member', '--password', PASSWORD]);
    const legacy = await cli(['clients', 'create', '--name', 'Refresher', '--type', 'confidential', '--grant', 'password', '--grant', 'refresh_token', '--scope', 'read:posts', '--scope', 'offline_access', '--legacy']);
    const credentials: [string, string] = [String(legacy.clientId), String(legacy.clientSecret)];
    const granted = await form(a.server.base, '/oauth/token', { grant_type: 'password', username: 'refresh.user@example.com', password: PASSWORD, scope: 'read:posts offline_access' }, credentials);
    expect(granted.status, JSON.stringify(granted.body)).toBe(200);
    const refreshToken = String(granted.body.refresh_token);
    const answers = await Promise.all([a, b].map((instance) => form(instance.server.base, '/oauth/token', { grant_type: 'refresh_token', refresh_token: refreshToken }, credentials)));
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses).toEqual([200, 400]);
    const winner = answers.find((answer) => answer.status === 200)!;
    expect(answers.find((answer) => answer.status === 400)!.body).toMatchObject({ error: 'invalid_grant' });
    // The loser's attempt is a reuse of a rotated token: the family, the winner's new tokens included, ends.
    const again = await form(a.server.base, '/oauth/token', { grant_type: 'refresh_token', refresh_token: String(winner.body.refresh_token) }, credentials);
    expect(again).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    await expectRefusedWithin(b.server.base, String(winner.body.access_token));
  });

  it('redeems an authorization code presented at the two instances at once for one of them only, and the reuse revokes what the winner received', async () => {
    await cli(['users', 'create', '--email', 'code.user@example.com', '--name', 'Code', '--role', 'member', '--password', PASSWORD]);
    const redirectUri = 'https://app.example/cb';
    const web = await cli(['clients', 'create', '--name', 'Web', '--type', 'confidential', '--grant', 'authorization_code', '--grant', 'refresh_token', '--redirect-uri', redirectUri, '--scope', 'read:posts']);
    const credentials: [string, string] = [String(web.clientId), String(web.clientSecret)];
    const verifier = randomBytes(32).toString('base64url');
    const authorize = new URLSearchParams({
      response_type: 'code',
      client_id: credentials[0],
      redirect_uri: redirectUri,
      scope: 'read:posts',
      state: 'state-1',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
    });
    // The user signs in and consents at one instance; the pages' redirects are relative, so the browser stays
    // on that instance until it is sent to the client.
    const outcome = await new SignInBrowser(overSocket(a.server.base), a.server.base).visit(`/oauth/authorize?${authorize}`, { email: 'code.user@example.com', password: PASSWORD });
    expect(outcome.page?.body).toBeUndefined();
    expect(`${outcome.redirect!.origin}${outcome.redirect!.pathname}`).toBe(redirectUri);
    expect(Object.fromEntries(outcome.redirect!.searchParams)).toEqual({ code: expect.any(String), state: 'state-1', iss: ISSUER });
    const code = outcome.redirect!.searchParams.get('code')!;

    const exchange = { grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier };
    const answers = await Promise.all([a, b].map((instance) => form(instance.server.base, '/oauth/token', exchange, credentials)));
    expect(answers.map((answer) => answer.status).sort(), JSON.stringify(answers.map((answer) => answer.body))).toEqual([200, 400]);
    const winner = answers.find((answer) => answer.status === 200)!;
    const loser = answers.find((answer) => answer.status === 400)!;
    expect(winner.body).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String) });
    // The two exchanges take the user's lock in turn, so the loser finds the code redeemed by an exchange
    // that issued tokens: a reuse, not a failed exchange, and nothing is issued to it.
    expect(loser.body).toEqual({ error: 'invalid_grant', error_description: 'The code was already used; the tokens issued for it are revoked.' });
    expect(loser.body).not.toHaveProperty('access_token');
    // A code presented twice has leaked: what the winner received ends with it, on both instances.
    await expectRefusedWithin(a.server.base, String(winner.body.access_token));
    await expectRefusedWithin(b.server.base, String(winner.body.access_token));
    const refreshed = await form(b.server.base, '/oauth/token', { grant_type: 'refresh_token', refresh_token: String(winner.body.refresh_token) }, credentials);
    expect(refreshed).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(refreshed.body).not.toHaveProperty('access_token');
  });

  it('goes on without Redis: requests answered, revocations reach the other instance through the database sequence; events cross again once Redis is back', async () => {
    await redis.stop();
    const service = await newServiceClient('NoRedis');
    const token = await clientToken(a.server.base, service);
    for (const instance of [a, b, a, b]) expect((await api(instance.server.base, token, 'GET', '/v1/posts')).status).toBe(200);
    const revoked = await form(a.server.base, '/oauth/revoke', { token }, service);
    expect(revoked.status).toBe(200);
    await expectRefusedWithin(b.server.base, token);
    for (const instance of [a, b]) {
      expect(instance.server.output()).toContain('redis.unavailable');
      expect(instance.server.child.exitCode).toBeNull();
    }

    await redis.start();
    // Both instances reconnect (and re-subscribe) by themselves.
    await expect.poll(() => a.server.output().includes('redis.available') && b.server.output().includes('redis.available'), { timeout: 10_000, interval: 100 }).toBe(true);
    const reader = await clientToken(b.server.base, admin, 'read:posts');
    const subscriber = subscribe(b, reader);
    await subscriber.ready;
    await new Promise((resolve) => setTimeout(resolve, 300));
    const created = await api(a.server.base, adminToken, 'POST', '/v1/posts', { title: 'After the outage', body: 'text', status: 'published' });
    expect(created.status).toBe(201);
    await expect.poll(() => subscriber.events, { timeout: 2000, interval: 20 }).toEqual([{ data: { postPublished: { id: created.body!.id, title: 'After the outage' } } }]);
  });
});
