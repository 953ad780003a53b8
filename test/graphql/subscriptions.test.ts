import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET, startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { createComment, createPost } from '../access/support.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { RECHECK_INTERVAL_MS } from '../../src/graphql/subscriptions/websocket.js';

interface Closed {
  code: number;
  reason: string;
}

describe.each(DATABASE_KINDS)('GraphQL subscriptions over WebSocket (graphql-ws) on %s', (kind) => {
  let t: TestApp;
  let url: string;
  let author: TestUser;
  let reader: TestUser;
  const clients: Client[] = [];

  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000', GRAPHQL_MAX_DEPTH: '4' });
    const address = await t.app.fastify.listen({ host: '127.0.0.1', port: 0 });
    url = `${address.replace('http', 'ws')}/graphql`;
    author = await t.createUser('member');
    reader = await t.createUser('member');
  });
  afterAll(async () => {
    for (const client of clients) await client.dispose();
    await t.close();
  });

  /** A graphql-ws client over a real socket; `closed` resolves with the server's close code. */
  function connect(connectionParams: Record<string, unknown> | undefined) {
    let resolveClosed: (closed: Closed) => void;
    const closed = new Promise<Closed>((resolve) => (resolveClosed = resolve));
    const client = createClient({
      url,
      webSocketImpl: WebSocket,
      connectionParams,
      lazy: false,
      retryAttempts: 0,
      on: { closed: (event) => resolveClosed({ code: (event as { code: number }).code, reason: String((event as { reason: unknown }).reason) }) },
      onNonLazyError: () => {},
    });
    clients.push(client);
    return { client, closed };
  }

  /** Collects a subscription's results; `ended` resolves with the error it ended with, or null when completed. */
  function subscribe(client: Client, query: string, variables?: Record<string, unknown>) {
    const results: unknown[] = [];
    let notify: (() => void) | null = null;
    const ended = new Promise<unknown>((resolve) => {
      client.subscribe(
        { query, variables },
        {
          next: (result) => {
            results.push(result);
            notify?.();
          },
          error: (error) => resolve(error),
          complete: () => resolve(null),
        },
      );
    });
    const nextResult = async (timeoutMs = 3000): Promise<unknown> => {
      const deadline = Date.now() + timeoutMs;
      while (results.length === 0) {
        if (Date.now() > deadline) throw new Error('no event arrived');
        await new Promise<void>((resolve) => {
          notify = resolve;
          setTimeout(resolve, 50);
        });
      }
      return results.shift();
    };
    return { results, ended, nextResult };
  }

  /** Lets in-flight events reach the client before asserting that one did not come. */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

  it('closes with 4403 a connection without a token, and one with a bad token', async () => {
    expect(await connect(undefined).closed).toEqual({ code: 4403, reason: 'Forbidden' });
    expect(await connect({ authorization: 'Bearer not-a-token' }).closed).toEqual({ code: 4403, reason: 'Forbidden' });
  });

  it('delivers a post when it is published, and never a draft', async () => {
    const { client } = connect({ authorization: `Bearer ${await reader.token()}` });
    const sub = subscribe(client, 'subscription { postPublished { id title status author { id } } }');
    await settle();
    const authorToken = await author.token();
    const draft = await createPost(t, authorToken, { title: 'a draft', status: 'draft' });
    const published = await createPost(t, authorToken, { title: 'out now', status: 'published' });
    expect(await sub.nextResult()).toEqual({
      data: { postPublished: { id: published.id, title: 'out now', status: 'published', author: null } },
      errors: [{ message: 'The resource does not exist.', locations: [{ line: 1, column: 48 }], path: ['postPublished', 'author'], extensions: { code: 'NOT_FOUND' } }],
    });
    const put = await t.request({ method: 'PUT', url: `/v1/posts/${draft.id}`, token: authorToken, body: { title: 'a draft, now out', body: 'text', status: 'published' } });
    expect(put.statusCode, put.body).toBe(200);
    expect(await sub.nextResult()).toMatchObject({ data: { postPublished: { id: draft.id, title: 'a draft, now out', status: 'published' } } });
    await settle();
    expect(sub.results).toEqual([]);
  });

  it('delivers comments on a post only while the subscriber may read it: a draft\'s comments never reach other members', async () => {
    const authorToken = await author.token();
    const post = await createPost(t, authorToken, { title: 'commented', status: 'published' });
    const { client } = connect({ authorization: `Bearer ${await reader.token()}` });
    const sub = subscribe(client, 'subscription ($post: ID!) { commentAdded(postId: $post) { body postId } }', { post: post.id });
    await settle();
    await createComment(t, authorToken, post.id, 'visible');
    expect(await sub.nextResult()).toEqual({ data: { commentAdded: { body: 'visible', postId: post.id } } });
    const other = await createPost(t, authorToken, { title: 'elsewhere', status: 'published' });
    await createComment(t, authorToken, other.id, 'on another post');
    const put = await t.request({ method: 'PUT', url: `/v1/posts/${post.id}`, token: authorToken, body: { title: 'commented', body: 'text', status: 'draft' } });
    expect(put.statusCode).toBe(200);
    await createComment(t, authorToken, post.id, 'hidden');
    await settle();
    expect(sub.results).toEqual([]);
  });

  it('follows a role taken away while subscribed: a draft\'s comments stop once its editor is a member again', async () => {
    const editor = await t.createUser('editor');
    const authorToken = await author.token();
    const draft = await createPost(t, authorToken, { title: 'draft under review', status: 'draft' });
    const { client } = connect({ authorization: `Bearer ${await editor.token()}` });
    const sub = subscribe(client, 'subscription ($post: ID!) { commentAdded(postId: $post) { body } }', { post: draft.id });
    await settle();
    await createComment(t, authorToken, draft.id, 'for the editor');
    expect(await sub.nextResult()).toEqual({ data: { commentAdded: { body: 'for the editor' } } });
    const admin = await t.adminClientToken();
    const current = (await t.request({ url: `/v1/users/${editor.id}`, token: admin })).json();
    const put = await t.request({ method: 'PUT', url: `/v1/users/${editor.id}`, token: admin, body: { email: current.email, name: current.name, role: 'member', active: true } });
    expect(put.statusCode, put.body).toBe(200);
    // The next check of the socket's token (within a second) sees the member.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await createComment(t, authorToken, draft.id, 'not for a member');
    await settle();
    expect(sub.results).toEqual([]);
  });

  it('decides every field of an event for the subscriber as they are then: a demoted editor no longer sees an author\'s email', async () => {
    const editor = await t.createUser('editor');
    const authorToken = await author.token();
    const { client } = connect({ authorization: `Bearer ${await editor.token()}` });
    const sub = subscribe(client, 'subscription { postPublished { title author { email } } }');
    await settle();
    await createPost(t, authorToken, { title: 'seen by an editor', status: 'published' });
    expect(await sub.nextResult()).toEqual({ data: { postPublished: { title: 'seen by an editor', author: { email: author.email } } } });
    const admin = await t.adminClientToken();
    const current = (await t.request({ url: `/v1/users/${editor.id}`, token: admin })).json();
    const put = await t.request({ method: 'PUT', url: `/v1/users/${editor.id}`, token: admin, body: { email: current.email, name: current.name, role: 'member', active: true } });
    expect(put.statusCode, put.body).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await createPost(t, authorToken, { title: 'seen by a member', status: 'published' });
    expect(await sub.nextResult()).toEqual({
      data: { postPublished: { title: 'seen by a member', author: null } },
      errors: [{ message: 'The resource does not exist.', locations: [{ line: 1, column: 38 }], path: ['postPublished', 'author'], extensions: { code: 'NOT_FOUND' } }],
    });
  });

  it('holds a socket to 10 subscriptions, even when the subscribe frames arrive in one read', async () => {
    const socket = new WebSocket(url, 'graphql-transport-ws');
    const messages: { id?: string; type: string; payload?: unknown }[] = [];
    socket.on('message', (data) => messages.push(JSON.parse(String(data))));
    await new Promise((resolve) => socket.once('open', resolve));
    socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${await reader.token()}` } }));
    const deadline = Date.now() + 3000;
    while (!messages.some((m) => m.type === 'connection_ack') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(messages).toEqual([{ type: 'connection_ack' }]);
    // Twenty subscribe frames in one TCP write: the server reads them in one go, before any check awaits.
    const raw = (socket as unknown as { _socket: import('node:net').Socket })._socket;
    raw.cork();
    for (let i = 0; i < 20; i++) socket.send(JSON.stringify({ id: `s${i}`, type: 'subscribe', payload: { query: 'subscription { postPublished { title } }' } }));
    raw.uncork();
    await settle();
    await createPost(t, await author.token(), { title: 'counted', status: 'published' });
    await settle();
    socket.close();
    const refused = messages.filter((m) => m.type === 'error');
    const delivered = messages.filter((m) => m.type === 'next');
    expect(refused).toHaveLength(10);
    for (const m of refused) expect(m.payload).toEqual([{ message: 'At most 10 subscriptions per connection.', extensions: { code: 'QUERY_TOO_COMPLEX' } }]);
    expect(delivered).toHaveLength(10);
    for (const m of delivered) expect(m.payload).toEqual({ data: { postPublished: { title: 'counted' } } });
    expect(new Set([...refused, ...delivered].map((m) => m.id)).size).toBe(20);
  });

  it('closes with 4409 a socket that reuses an id still in use, and ends every stream of a closed socket', async () => {
    await settle();
    const baseline = t.app.events.subscriberCount;
    const open = async () => {
      const socket = new WebSocket(url, 'graphql-transport-ws');
      const closed = new Promise<Closed>((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
      await new Promise((resolve) => socket.once('open', resolve));
      const acked = new Promise((resolve) => socket.once('message', resolve));
      socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${await reader.token()}` } }));
      await acked;
      return { socket, closed, raw: (socket as unknown as { _socket: import('node:net').Socket })._socket };
    };
    const subscribeFrame = (id: string) => JSON.stringify({ id, type: 'subscribe', payload: { query: 'subscription { postPublished { title } }' } });

    // A subscribe, its complete and the same id again, read in one go: the second is refused and the socket closed.
    const reused = await open();
    reused.raw.cork();
    reused.socket.send(subscribeFrame('x'));
    reused.socket.send(JSON.stringify({ id: 'x', type: 'complete' }));
    reused.socket.send(subscribeFrame('x'));
    reused.raw.uncork();
    expect(await reused.closed).toEqual({ code: 4409, reason: 'Subscriber for x already exists' });

    // Sockets closed by their clients with subscriptions running, or still being checked: nothing stays subscribed.
    for (let i = 0; i < 3; i++) {
      const { socket, raw, closed } = await open();
      raw.cork();
      for (let n = 0; n < 10; n++) socket.send(subscribeFrame(`s${n}`));
      raw.uncork();
      if (i > 0) await settle();
      socket.close();
      await closed;
    }
    await settle();
    expect(t.app.events.subscriberCount).toBe(baseline);
  });

  it('refuses a subscription to the comments of a post the subscriber may not read, as if it did not exist', async () => {
    const draft = await createPost(t, await author.token(), { title: 'secret', status: 'draft' });
    const { client } = connect({ authorization: `Bearer ${await reader.token()}` });
    const sub = subscribe(client, 'subscription ($post: ID!) { commentAdded(postId: $post) { body } }', { post: draft.id });
    // A refused source stream has no data at all (GraphQL spec, CreateSourceEventStream).
    expect(await sub.nextResult()).toEqual({
      errors: [{ message: 'The resource does not exist.', locations: [{ line: 1, column: 29 }], path: ['commentAdded'], extensions: { code: 'NOT_FOUND' } }],
    });
  });

  it('holds subscription documents to the same limits and scopes as POST', async () => {
    const { client } = connect({ authorization: `Bearer ${await reader.token(['read:comments'])}` });
    const deep = subscribe(client, 'subscription { postPublished { author { posts(first: 1) { nodes { author { id } } } } } }');
    expect(await deep.ended).toEqual([{ message: expect.stringMatching(/^Depth limit/), extensions: { code: 'QUERY_TOO_DEEP' } }]);
    const query = subscribe(client, '{ posts(first: 1) { nodes { id } } }');
    expect(await query.ended).toEqual([{ message: 'Only subscriptions run over WebSocket; send queries and mutations with POST.', extensions: { code: 'VALIDATION_FAILED' } }]);
    const unscoped = subscribe(client, 'subscription { postPublished { id } }');
    expect(await unscoped.nextResult()).toEqual({
      errors: [{ message: 'The access token needs the scope read:posts.', locations: [{ line: 1, column: 16 }], path: ['postPublished'], extensions: { code: 'INSUFFICIENT_SCOPE' } }],
    });
  });

  it('closes the socket with 4403 once the user is deactivated (their tokens revoked)', async () => {
    const member = await t.createUser('member');
    const { client, closed } = connect({ authorization: `Bearer ${await member.token()}` });
    subscribe(client, 'subscription { postPublished { id } }');
    await settle();
    const current = (await t.request({ url: `/v1/users/${member.id}`, token: await t.adminClientToken() })).json();
    const put = await t.request({
      method: 'PUT',
      url: `/v1/users/${member.id}`,
      token: await t.adminClientToken(),
      body: { email: current.email, name: current.name, role: current.role, active: false },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(await closed).toEqual({ code: 4403, reason: 'Forbidden' });
  });

  /** Revokes an access token at the revocation endpoint (RFC 7009), as the administrator client. */
  async function revoke(token: string): Promise<void> {
    const revoked = await t.app.fastify.inject({
      method: 'POST',
      url: '/oauth/revoke',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${ADMIN_CLIENT_ID}:${ADMIN_CLIENT_SECRET}`).toString('base64')}` },
      payload: new URLSearchParams({ token }).toString(),
    });
    expect(revoked.statusCode, revoked.body).toBe(200);
  }

  it('closes the socket with 4403 once its token alone is revoked (RFC 7009)', async () => {
    const member = await t.createUser('member');
    const token = await member.token();
    const { client, closed } = connect({ authorization: `Bearer ${token}` });
    subscribe(client, 'subscription { postPublished { id } }');
    await settle();
    await revoke(token);
    expect(await closed).toEqual({ code: 4403, reason: 'Forbidden' });
  });

  it('closes the socket with 4403 once its token is revoked, also when the token was verified before the socket opened', async () => {
    const member = await t.createUser('member');
    const token = await member.token();
    // Used once over HTTP first: the token is in the cache of verified tokens when the socket authenticates.
    const used = await t.request({ url: '/v1/posts', token });
    expect(used.statusCode, used.body).toBe(200);
    const { client, closed } = connect({ authorization: `Bearer ${token}` });
    subscribe(client, 'subscription { postPublished { id } }');
    await settle();
    const revokedAt = Date.now();
    await revoke(token);
    expect(await closed).toEqual({ code: 4403, reason: 'Forbidden' });
    // At the connection's next check (every RECHECK_INTERVAL_MS): not only once the statuses cached with the
    // token (5 s) have to be read again.
    expect(Date.now() - revokedAt).toBeLessThan(RECHECK_INTERVAL_MS + 2000);
  });

  it('answers a plain GET /graphql with 405 and Allow: POST', async () => {
    const res = await fetch(url.replace('ws', 'http'));
    expect({ status: res.status, allow: res.headers.get('allow'), body: await res.json() }).toEqual({
      status: 405,
      allow: 'POST',
      body: { errors: [{ message: 'GET is not allowed here; use POST (subscriptions: a WebSocket upgrade).', extensions: { code: 'METHOD_NOT_ALLOWED' } }] },
    });
  });
});

describe('a subscription weighs its cost for every event it delivers, against a budget of its own', () => {
  let t: TestApp;
  let client: Client | undefined;
  afterAll(async () => {
    await client?.dispose();
    await t?.close();
  });

  it('delivers events while its budget lasts, then ends with RATE_LIMITED; the caller\'s budgets pay only for the subscribe', async () => {
    t = await startTestApp('sqlite', { RATE_LIMIT_MAX: '20', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' });
    const address = await t.app.fastify.listen({ host: '127.0.0.1', port: 0 });
    const reader = await t.createUser('member');
    const results: unknown[][] = [[], []];
    const completed = [false, false];
    client = createClient({
      url: `${address.replace('http', 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      connectionParams: { authorization: `Bearer ${await reader.token()}` },
      lazy: false,
      retryAttempts: 0,
      onNonLazyError: () => {},
    });
    // Two subscriptions: they share the caller's budget of events, so a second one buys no more.
    for (const i of [0, 1]) {
      client.subscribe(
        { query: 'subscription { postPublished { id title status } }' },
        { next: (result) => results[i]!.push(result), error: (error) => results[i]!.push({ ended: error }), complete: () => (completed[i] = true) },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    const now = new Date().toISOString();
    // Events published by someone else (straight onto this instance's bus).
    for (let i = 0; i < 20 && !completed.every(Boolean); i++) {
      t.app.events.publish('postPublished', { id: `p${i}`, authorId: reader.id, title: `t${i}`, body: 'b', status: 'published', createdAt: now, updatedAt: now });
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    await expect.poll(() => completed.every(Boolean), { timeout: 2000, interval: 20 }).toBe(true);
    // The subscriptions' budget of events is the caller's size, 20 points a window: 4 per event delivered
    // (1 + its three fields), so five deliveries between the two (each event goes to both).
    const delivered = results.flatMap((one) => one.slice(0, -1));
    expect(delivered).toHaveLength(5);
    expect(delivered.every((result) => (result as { data?: unknown }).data !== undefined)).toBe(true);
    for (const one of results) {
      expect(one.at(-1)).toEqual({ errors: [{ message: expect.stringMatching(/^Too many requests; retry in \d+ s\.$/), extensions: { code: 'RATE_LIMITED' } }] });
    }
    // The caller's budgets (its own and its client's, which the client's other users share) paid 1 for the
    // connection and 4 for each subscription, nothing for the events: this request leaves 10 of 20.
    const res = await fetch(`${address}/v1/users/${reader.id}`, { headers: { authorization: `Bearer ${await reader.token()}` } });
    expect({ status: res.status, ratelimit: res.headers.get('ratelimit') }).toEqual({ status: 200, ratelimit: expect.stringMatching(/^"client";r=10;t=\d+$/) });
  });
});
