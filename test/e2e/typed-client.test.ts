import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createPortcullisClient, type PortcullisClient } from '../../generated/client.js';
import { contractBackend, readPublishedSpec } from '../../mock/contract-backend.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { ResponseChecker } from '../helpers/response-checker.js';

// Client teams' view: the typed client generated from the published contract (openapi-typescript +
// openapi-fetch) drives every REST operation against the server on a real socket, and every response it
// receives is checked against that contract by openapi-backend.

const OPERATION_IDS = Object.values(readPublishedSpec().paths ?? {})
  .flatMap((item) => Object.values(item ?? {}).map((op) => (op as { operationId: string }).operationId))
  .sort();

let running: TestApp | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

async function listen(t: TestApp): Promise<string> {
  await t.app.fastify.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(t.app.fastify.server.address() as AddressInfo).port}`;
}

function errorBody(code: string, message: string) {
  return { error: { code, message } };
}

describe.each(DATABASE_KINDS)('the typed client against the server (%s)', (kind) => {
  it('drives every operation; every response is one the contract declares', async () => {
    const t = (running = await startTestApp(kind));
    const baseUrl = await listen(t);
    const checker = new ResponseChecker(await contractBackend());
    const admin = await t.createUser('admin');
    const typed = (token?: string): PortcullisClient => {
      const client = createPortcullisClient({ baseUrl, headers: token ? { authorization: `Bearer ${token}` } : {} });
      client.use(checker.middleware);
      return client;
    };
    const api = typed(await admin.token());

    // Meta
    const contract = await api.GET('/v1/rest');
    expect([contract.response.status, contract.data?.openapi]).toEqual([200, '3.1.0']);
    const sdl = await api.GET('/v1/graphql', { parseAs: 'text' });
    expect(sdl.response.status).toBe(200);
    expect(sdl.data).toContain('type Query');
    const authorization = await api.GET('/v1/authorization');
    expect([authorization.response.status, authorization.data?.principal]).toEqual([200, { type: 'user', id: admin.id, clientId: 'portcullis-admin', role: 'admin' }]);
    const tokenInfo = await api.GET('/v1/oauth');
    expect([tokenInfo.response.status, tokenInfo.data?.subject, tokenInfo.data?.format]).toEqual([200, admin.id, 'jwt']);

    // Users
    const email = `carol-${kind}@example.com`;
    const created = await api.POST('/v1/users', { body: { email, name: 'Carol', role: 'member', password: 'correct-horse-battery-staple' } });
    expect(created.response.status).toBe(201);
    const userId = created.data!.id;
    expect(created.response.headers.get('location')).toBe(`/v1/users/${userId}`);
    expect(created.data).toEqual({ id: userId, email, name: 'Carol', role: 'member', active: true, createdAt: expect.any(String), updatedAt: expect.any(String) });
    const users = await api.GET('/v1/users', { params: { query: { role: 'member', limit: 10 } } });
    expect([users.response.status, users.data?.data.map((u) => u.id), users.data?.page]).toEqual([200, [userId], { limit: 10, next: null }]);
    const user = await api.GET('/v1/users/{userId}', { params: { path: { userId } } });
    expect([user.response.status, user.data]).toEqual([200, created.data]);
    const userTag = user.response.headers.get('etag')!;
    const unchanged = await api.GET('/v1/users/{userId}', { params: { path: { userId }, header: { 'If-None-Match': userTag } } });
    expect(unchanged.response.status).toBe(304);
    const replacedUser = await api.PUT('/v1/users/{userId}', {
      params: { path: { userId }, header: { 'If-Match': userTag } },
      body: { email, name: 'Carol Jones', role: 'editor', active: true },
    });
    expect([replacedUser.response.status, replacedUser.data?.name, replacedUser.data?.role]).toEqual([200, 'Carol Jones', 'editor']);
    // A merge patch changes only what it names; the ETag of the PUT is the one to send.
    const patchedUser = await api.PATCH('/v1/users/{userId}', {
      params: { path: { userId }, header: { 'If-Match': replacedUser.response.headers.get('etag')! } },
      body: { name: 'Carol J.' },
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect([patchedUser.response.status, patchedUser.data?.name, patchedUser.data?.role, patchedUser.data?.email]).toEqual([200, 'Carol J.', 'editor', email]);

    // Posts
    const post = await api.POST('/v1/posts', { body: { title: 'Hello', body: 'First post', status: 'published' } });
    expect([post.response.status, post.data?.authorId, post.data?.title]).toEqual([201, admin.id, 'Hello']);
    const postId = post.data!.id;
    const posts = await api.GET('/v1/posts', { params: { query: { authorId: admin.id } } });
    expect([posts.response.status, posts.data?.data.map((p) => p.id)]).toEqual([200, [postId]]);
    const expanded = await api.GET('/v1/posts/{postId}', { params: { path: { postId }, query: { expand: ['author'] } } });
    expect([expanded.response.status, expanded.data?.author?.id]).toEqual([200, admin.id]);
    const userPosts = await api.GET('/v1/users/{userId}/posts', { params: { path: { userId: admin.id } } });
    expect([userPosts.response.status, userPosts.data?.data.map((p) => p.id)]).toEqual([200, [postId]]);
    const replacedPost = await api.PUT('/v1/posts/{postId}', { params: { path: { postId } }, body: { title: 'Hello again', body: 'Edited', status: 'draft' } });
    expect([replacedPost.response.status, replacedPost.data?.status]).toEqual([200, 'draft']);
    const patchedPost = await api.PATCH('/v1/posts/{postId}', { params: { path: { postId } }, body: { status: 'published' }, headers: { 'content-type': 'application/merge-patch+json' } });
    expect([patchedPost.response.status, patchedPost.data?.status, patchedPost.data?.title]).toEqual([200, 'published', 'Hello again']);

    // Comments
    const comment = await api.POST('/v1/posts/{postId}/comments', { params: { path: { postId } }, body: { body: 'Nice.' } });
    expect([comment.response.status, comment.data?.postId, comment.data?.body]).toEqual([201, postId, 'Nice.']);
    const commentId = comment.data!.id;
    const comments = await api.GET('/v1/posts/{postId}/comments', { params: { path: { postId } } });
    expect([comments.response.status, comments.data?.data.map((c) => c.id)]).toEqual([200, [commentId]]);
    const fetchedComment = await api.GET('/v1/comments/{commentId}', { params: { path: { commentId }, query: { expand: ['post'] } } });
    expect([fetchedComment.response.status, fetchedComment.data?.post?.id]).toEqual([200, postId]);
    const replacedComment = await api.PUT('/v1/comments/{commentId}', { params: { path: { commentId } }, body: { body: 'Very nice.' } });
    expect([replacedComment.response.status, replacedComment.data?.body]).toEqual([200, 'Very nice.']);
    const patchedComment = await api.PATCH('/v1/comments/{commentId}', { params: { path: { commentId } }, body: { body: 'Very, very nice.' }, headers: { 'content-type': 'application/merge-patch+json' } });
    expect([patchedComment.response.status, patchedComment.data?.body]).toEqual([200, 'Very, very nice.']);
    expect((await api.DELETE('/v1/comments/{commentId}', { params: { path: { commentId } } })).response.status).toBe(204);
    expect((await api.DELETE('/v1/posts/{postId}', { params: { path: { postId } } })).response.status).toBe(204);

    // Clients
    const registration = {
      clientId: `reporting-${kind}`,
      name: 'Reporting service',
      type: 'confidential' as const,
      grantTypes: ['client_credentials' as const],
      scopes: ['read:posts' as const],
      role: 'member' as const,
    };
    const registered = await api.POST('/v1/clients', { body: registration });
    expect([registered.response.status, registered.data?.clientId, typeof registered.data?.clientSecret]).toEqual([201, registration.clientId, 'string']);
    const clientId = registered.data!.id;
    const clients = await api.GET('/v1/clients');
    expect([clients.response.status, clients.data?.data.map((c) => c.clientId).sort()]).toEqual([200, ['portcullis-admin', registration.clientId].sort()]);
    const fetchedClient = await api.GET('/v1/clients/{clientId}', { params: { path: { clientId } } });
    expect([fetchedClient.response.status, fetchedClient.data?.name, 'clientSecret' in (fetchedClient.data ?? {})]).toEqual([200, 'Reporting service', false]);
    const replacedClient = await api.PUT('/v1/clients/{clientId}', {
      params: { path: { clientId } },
      body: { name: 'Reports', type: 'confidential', grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member', accessTokenFormat: 'opaque', accessTokenTtl: 900, firstParty: false, legacy: false },
    });
    expect([replacedClient.response.status, replacedClient.data?.name, replacedClient.data?.accessTokenFormat]).toEqual([200, 'Reports', 'opaque']);
    const patchedClient = await api.PATCH('/v1/clients/{clientId}', { params: { path: { clientId } }, body: { accessTokenTtl: 600 }, headers: { 'content-type': 'application/merge-patch+json' } });
    expect([patchedClient.response.status, patchedClient.data?.name, patchedClient.data?.accessTokenTtl]).toEqual([200, 'Reports', 600]);
    expect((await api.DELETE('/v1/clients/{clientId}', { params: { path: { clientId } } })).response.status).toBe(204);

    // Audit, then the user goes
    const audit = await api.GET('/v1/audit-events', { params: { query: { subject: admin.id, limit: 100 } } });
    expect(audit.response.status).toBe(200);
    expect(audit.data?.data.length).toBeGreaterThan(20);
    // No deprecated operation or field was used, so nothing is counted.
    const deprecations = await api.GET('/v1/deprecations', { params: { query: { limit: 10 } } });
    expect([deprecations.response.status, deprecations.data]).toEqual([200, { data: [], page: { limit: 10, next: null } }]);
    expect((await api.DELETE('/v1/users/{userId}', { params: { path: { userId } } })).response.status).toBe(204);

    // Refusals, each a status and body the contract declares for the operation
    const gone = await api.GET('/v1/posts/{postId}', { params: { path: { postId } } });
    expect([gone.response.status, gone.error]).toEqual([404, errorBody('NOT_FOUND', 'The resource does not exist.')]);
    const badLimit = await api.GET('/v1/users', { params: { query: { limit: 0 } } });
    expect([badLimit.response.status, badLimit.error]).toEqual([
      400,
      { error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path: '/query/limit', message: 'must be >= 1' }] } },
    ]);
    const anonymous = await typed().GET('/v1/users');
    expect([anonymous.response.status, anonymous.error?.error.code]).toEqual([401, 'UNAUTHENTICATED']);
    const narrow = await typed(await admin.token(['read:posts'])).GET('/v1/users');
    expect([narrow.response.status, narrow.error?.error.code]).toEqual([403, 'INSUFFICIENT_SCOPE']);
    const taken = await api.POST('/v1/users', { body: { email: admin.email, name: 'Again', role: 'member', password: 'correct-horse-battery-staple' } });
    expect([taken.response.status, taken.error?.error.code]).toEqual([409, 'CONFLICT']);
    const stale = await api.PUT('/v1/users/{userId}', {
      params: { path: { userId: admin.id }, header: { 'If-Match': '"stale"' } },
      body: { email: admin.email, name: 'Admin', role: 'admin', active: true },
    });
    expect([stale.response.status, stale.error?.error.code]).toEqual([412, 'PRECONDITION_FAILED']);
    const first = await api.POST('/v1/posts', { params: { header: { 'Idempotency-Key': `key-${kind}` } }, body: { title: 'A', body: 'a', status: 'draft' } });
    const reused = await api.POST('/v1/posts', { params: { header: { 'Idempotency-Key': `key-${kind}` } }, body: { title: 'B', body: 'b', status: 'draft' } });
    expect([first.response.status, reused.response.status, reused.error?.error.code]).toEqual([201, 422, 'IDEMPOTENCY_KEY_REUSED']);

    expect(checker.problems).toEqual([]);
    expect([...checker.seen.keys()].sort()).toEqual(OPERATION_IDS);
    expect(OPERATION_IDS.filter((id) => !checker.seen.get(id)!.some((status) => status >= 200 && status < 300))).toEqual([]);
    expect(OPERATION_IDS).toHaveLength(31);
  }, 60_000);
});

describe('the response checker', () => {
  it('fails a status, a body or a header the contract does not declare for the operation', async () => {
    const api = await contractBackend();
    const checker = new ResponseChecker(api);
    const getPost = api.router.getOperation('getPost')!;
    const deletePost = api.router.getOperation('deletePost')!;
    const json = { 'content-type': 'application/json; charset=utf-8' };
    await checker.check(getPost, new Response(JSON.stringify(errorBody('CONFLICT', 'No.')), { status: 409, headers: json }));
    await checker.check(getPost, new Response(JSON.stringify({ error: { code: 'NOT_FOUND', message: 'No.', stack: 'x' } }), { status: 404, headers: json }));
    await checker.check(getPost, new Response('<p>no</p>', { status: 404, headers: { 'content-type': 'text/html' } }));
    await checker.check(deletePost, new Response(null, { status: 204 }));
    await checker.check(getPost, new Response(JSON.stringify(errorBody('NOT_FOUND', 'The resource does not exist.')), { status: 404, headers: { ...json, 'ratelimit-policy': '' } }));
    expect(checker.problems).toEqual([
      'getPost 409: status not declared by the contract',
      expect.stringMatching(/^getPost 404: body \[.*"additionalProperty":"stack".*\]$/),
      'getPost 404: media type text/html not declared (application/json)',
      expect.stringMatching(/^getPost 404: headers \[.*ratelimit-policy.*\]$/),
    ]);
    expect(checker.seen).toEqual(new Map([['getPost', [409, 404, 404, 404]], ['deletePost', [204]]]));
  });
});
