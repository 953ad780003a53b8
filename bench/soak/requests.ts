import type { Kind, Tally } from './tally.js';
import { NoAnswer, type Answer, type Target } from './target.js';
import type { Writes } from './writes.js';

/**
 * A confidential client of the load (role editor, client credentials; read:users besides the posts' scopes,
 * so that GraphQL may resolve a post's author).
 */
export interface LoadClient {
  clientId: string;
  clientSecret: string;
}

/** One of the load's connections-worth of work: a loop that sends one request at a time. */
export interface Loop {
  index: number;
  client: LoadClient;
  token: string;
  /** Posts this loop created: only it changes them. */
  own: string[];
  sequence: number;
}

export interface Soak {
  targets: readonly Target[];
  tally: Tally;
  writes: Writes;
  /** The posts made before the load (by a user, so GraphQL resolves their authors). */
  seeds: readonly string[];
  random: () => number;
}

export const LOAD_SCOPES = ['read:posts', 'write:posts', 'read:users'];
const JSON_TYPE = 'application/json';
const POSTS_QUERY = '{ posts(first: 10) { nodes { id title author { id } } } }';
const POST_QUERY = 'query Post($id: ID!) { post(id: $id) { id title status } }';
const CREATE_MUTATION = 'mutation Create($input: PostInput!) { createPost(input: $input) { id title } }';

/** Sends one request and tallies its status; null when it got no answer (tallied as such). */
async function send(soak: Soak, kind: Kind, target: Target, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer | null> {
  try {
    const answer = await target.send(method, path, headers, body);
    soak.tally.answered(kind, target.name, answer.status, answer.ms);
    return answer;
  } catch (error) {
    if (!(error instanceof NoAnswer)) throw error;
    soak.tally.noAnswer(kind, target.name, error.message);
    return null;
  }
}

/** The answer's JSON body when it has the expected status; otherwise a failure is tallied and null returned. */
function expectStatus(soak: Soak, kind: Kind, target: Target, answer: Answer | null, status: number): Record<string, any> | null {
  if (answer === null) return null;
  if (answer.status !== status) {
    soak.tally.wrong(kind, target.name, `${answer.status} ${answer.body}`);
    return null;
  }
  return JSON.parse(answer.body) as Record<string, any>;
}

function bearer(loop: Loop): Record<string, string> {
  return { authorization: `Bearer ${loop.token}` };
}

export async function requestToken(soak: Soak, loop: Loop, target: Target): Promise<void> {
  const kind: Kind = 'token (client credentials)';
  const basic = Buffer.from(`${encodeURIComponent(loop.client.clientId)}:${encodeURIComponent(loop.client.clientSecret)}`).toString('base64');
  const answer = await send(soak, kind, target, 'POST', '/oauth/token', { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' }, new URLSearchParams({ grant_type: 'client_credentials', scope: LOAD_SCOPES.join(' ') }).toString());
  const body = expectStatus(soak, kind, target, answer, 200);
  if (body === null) return;
  if (typeof body.access_token !== 'string') return soak.tally.wrong(kind, target.name, `no access_token: ${answer!.body}`);
  soak.tally.expected(answer!.headers['x-request-id'], 1);
  // The loop goes on with the new token, on both instances: one issued here is verified there.
  loop.token = body.access_token;
}

export async function listPosts(soak: Soak, loop: Loop, target: Target): Promise<void> {
  const kind: Kind = 'REST GET /v1/posts';
  const answer = await send(soak, kind, target, 'GET', '/v1/posts?limit=20', bearer(loop));
  const body = expectStatus(soak, kind, target, answer, 200);
  if (body === null) return;
  if (!Array.isArray(body.data) || body.data.length === 0) return soak.tally.wrong(kind, target.name, `an empty page: ${answer!.body}`);
  soak.tally.expected(answer!.headers['x-request-id'], 1);
}

export async function readPost(soak: Soak, loop: Loop, target: Target): Promise<void> {
  const kind: Kind = 'REST GET /v1/posts/{id}';
  const id = soak.writes.pick(soak.random) ?? soak.seeds[0]!;
  const answer = await send(soak, kind, target, 'GET', `/v1/posts/${id}`, bearer(loop));
  const body = expectStatus(soak, kind, target, answer, 200);
  if (body === null) return;
  if (body.id !== id) return soak.tally.wrong(kind, target.name, `asked for ${id}, got ${answer!.body}`);
  soak.tally.expected(answer!.headers['x-request-id'], 1);
}

/**
 * POST /v1/posts; a third carry an Idempotency-Key, and half of those are sent again at once to the other
 * instance, which must answer the same post (`Idempotent-Replayed: true`) and create nothing.
 */
export async function createPost(soak: Soak, loop: Loop, target: Target): Promise<void> {
  const kind: Kind = 'REST POST /v1/posts';
  const sequence = ++loop.sequence;
  const title = `soak ${loop.index}.${sequence}`;
  const payload = JSON.stringify({ title, body: `Written by loop ${loop.index} of the soak.`, status: soak.random() < 0.5 ? 'published' : 'draft' });
  const key = soak.random() < 1 / 3 ? `soak-${loop.index}-${sequence}` : null;
  const headers = { ...bearer(loop), 'content-type': JSON_TYPE, ...(key === null ? {} : { 'idempotency-key': key }) };
  const answer = await send(soak, kind, target, 'POST', '/v1/posts', headers, payload);
  const body = expectStatus(soak, kind, target, answer, 201);
  if (body === null) return;
  if (typeof body.id !== 'string') return soak.tally.wrong(kind, target.name, `no id: ${answer!.body}`);
  soak.tally.expected(answer!.headers['x-request-id'], 1);
  soak.writes.created(body.id, title);
  loop.own.push(body.id);
  if (key === null || soak.random() < 0.5) return;

  const repeatKind: Kind = 'REST POST, Idempotency-Key repeated';
  const other = soak.targets.find((t) => t !== target)!;
  const repeat = await send(soak, repeatKind, other, 'POST', '/v1/posts', headers, payload);
  const again = expectStatus(soak, repeatKind, other, repeat, 201);
  if (again === null) return;
  soak.tally.expected(repeat!.headers['x-request-id'], 1);
  soak.writes.replays++;
  if (again.id !== body.id || repeat!.headers['idempotent-replayed'] !== 'true') {
    soak.writes.replayMismatches++;
    soak.tally.wrong(repeatKind, other.name, `first answered ${body.id}, the repeat ${again.id} (idempotent-replayed: ${repeat!.headers['idempotent-replayed']})`);
  }
}

/** PATCH (JSON merge patch) of a post this loop created; without one yet, it creates one. */
export async function patchPost(soak: Soak, loop: Loop, target: Target): Promise<void> {
  if (loop.own.length === 0) return createPost(soak, loop, target);
  const kind: Kind = 'REST PATCH /v1/posts/{id}';
  const id = loop.own[Math.floor(soak.random() * loop.own.length)]!;
  const title = `soak ${loop.index}.${++loop.sequence} (edited)`;
  const answer = await send(soak, kind, target, 'PATCH', `/v1/posts/${id}`, { ...bearer(loop), 'content-type': 'application/merge-patch+json' }, JSON.stringify({ title }));
  const body = expectStatus(soak, kind, target, answer, 200);
  if (body === null) return;
  if (body.id !== id || body.title !== title) return soak.tally.wrong(kind, target.name, `patched ${id} to "${title}", got ${answer!.body}`);
  soak.tally.expected(answer!.headers['x-request-id'], 1);
  soak.writes.patched(id, title);
}

async function graphql(soak: Soak, kind: Kind, loop: Loop, target: Target, query: string, variables?: Record<string, unknown>): Promise<Record<string, any> | null> {
  const headers = { ...bearer(loop), 'content-type': JSON_TYPE, accept: JSON_TYPE };
  const answer = await send(soak, kind, target, 'POST', '/graphql', headers, JSON.stringify({ query, variables }));
  const body = expectStatus(soak, kind, target, answer, 200);
  if (body === null) return null;
  if (body.errors !== undefined || body.data == null) {
    soak.tally.wrong(kind, target.name, `errors: ${answer!.body}`);
    return null;
  }
  // One root field per document: one decision.
  soak.tally.expected(answer!.headers['x-request-id'], 1);
  return body.data as Record<string, any>;
}

export async function queryPosts(soak: Soak, loop: Loop, target: Target): Promise<void> {
  const kind: Kind = 'GraphQL posts(first: 10)';
  const data = await graphql(soak, kind, loop, target, POSTS_QUERY);
  if (data !== null && data.posts?.nodes?.length !== 10) soak.tally.wrong(kind, target.name, `not 10 posts: ${JSON.stringify(data)}`);
}

export async function queryPost(soak: Soak, loop: Loop, target: Target): Promise<void> {
  const kind: Kind = 'GraphQL post(id)';
  const id = soak.writes.pick(soak.random) ?? soak.seeds[0]!;
  const data = await graphql(soak, kind, loop, target, POST_QUERY, { id });
  if (data !== null && data.post?.id !== id) soak.tally.wrong(kind, target.name, `asked for ${id}, got ${JSON.stringify(data)}`);
}

export async function mutateCreatePost(soak: Soak, loop: Loop, target: Target): Promise<void> {
  const kind: Kind = 'GraphQL createPost';
  const title = `soak ${loop.index}.${++loop.sequence} (GraphQL)`;
  const input = { title, body: `Written through GraphQL by loop ${loop.index}.`, status: 'draft' };
  const data = await graphql(soak, kind, loop, target, CREATE_MUTATION, { input });
  if (data === null) return;
  const id = data.createPost?.id;
  if (typeof id !== 'string') return soak.tally.wrong(kind, target.name, `no id: ${JSON.stringify(data)}`);
  soak.writes.created(id, title);
  loop.own.push(id);
}

/** Reads a written post back after the load: missing (404) and stale (another title) are lost writes. */
export async function readBack(soak: Soak, loop: Loop, target: Target, id: string, title: string): Promise<'found' | 'missing' | 'stale' | 'failed'> {
  const kind: Kind = 'read-back GET /v1/posts/{id}';
  const answer = await send(soak, kind, target, 'GET', `/v1/posts/${id}`, bearer(loop));
  if (answer === null) return 'failed';
  if (answer.status === 404) {
    soak.tally.expected(answer.headers['x-request-id'], 1);
    return 'missing';
  }
  const body = expectStatus(soak, kind, target, answer, 200);
  if (body === null) return 'failed';
  soak.tally.expected(answer.headers['x-request-id'], 1);
  return body.title === title ? 'found' : 'stale';
}
