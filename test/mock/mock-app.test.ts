import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPortcullisClient } from '../../generated/client.js';
import { routes } from '../../generated/routes.js';
import { contractBackend, readPublishedSpec } from '../../mock/contract-backend.js';
import { buildMockApp } from '../../mock/mock-app.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { ResponseChecker } from '../helpers/response-checker.js';

// `npm run mock`: every operation answered from the contract's examples, after the server's own request checks.

const spec = readPublishedSpec() as any;

/** The contract's example for an operation's response: `example`, or the first of `examples`. */
function contractExample(path: string, method: string, status: string): unknown {
  const resolve = (node: any): any => (node?.$ref ? resolve(node.$ref.split('/').slice(1).reduce((n: any, key: string) => n[key], spec)) : node);
  const response = resolve(spec.paths[path][method.toLowerCase()].responses[status]);
  const media: any = Object.values(response.content ?? {})[0];
  if (!media) return undefined;
  return 'example' in media ? media.example : resolve(Object.values(media.examples)[0]).value;
}

describe('the mock server', () => {
  let mock: FastifyInstance;
  let baseUrl: string;
  beforeAll(async () => {
    mock = await buildMockApp({ bodyLimit: 65536 });
    await mock.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(mock.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => mock?.close());

  it('answers every operation with its success status, the example body and the declared headers', async () => {
    const checker = new ResponseChecker(await contractBackend());
    const api = await contractBackend();
    for (const route of routes) {
      const operation = api.router.getOperation(route.operationId)!;
      const url = route.path.replace(/\{[^}]+\}/g, '018f6b2b11aa4c3d8e9f0a1b2c3d4e5f');
      const mediaType = route.bodyMediaType ?? 'application/json';
      const requestBody = (operation.requestBody as any)?.content[mediaType].example;
      const res = await fetch(`${baseUrl}${url}`, {
        method: route.method,
        ...(requestBody !== undefined ? { headers: { 'content-type': mediaType }, body: JSON.stringify(requestBody) } : {}),
      });
      await checker.check(operation, res);
      const status = String(route.successStatus);
      expect([route.operationId, res.status]).toEqual([route.operationId, route.successStatus]);
      // The contract itself is served as it is published, not an example of it.
      const example = route.operationId === 'getRestContract' ? spec : contractExample(route.path, route.method, status);
      const text = await res.text();
      expect([route.operationId, text === '' ? undefined : route.successMediaType === 'application/json' ? JSON.parse(text) : text]).toEqual([route.operationId, example]);
    }
    expect(checker.problems).toEqual([]);
    expect(checker.seen.size).toBe(31);
  });

  it('answers like the server for a path asked with another method (405 with Allow) and for an unversioned path', async () => {
    const res = await fetch(`${baseUrl}/v1/rest`, { method: 'POST' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    expect(await res.json()).toEqual({ error: { code: 'METHOD_NOT_ALLOWED', message: 'POST is not allowed here; use GET, HEAD.' } });
    const unversioned = routes.find((route) => route.operationId === 'listPosts')!.unversionedUrl;
    expect(unversioned).not.toBeNull();
    const versioned = await fetch(`${baseUrl}${unversioned}`, { headers: { accept: 'application/vnd.portcullis+json; version=1' } });
    expect(versioned.status).toBe(200);
    const future = await fetch(`${baseUrl}${unversioned}`, { headers: { accept: 'application/vnd.portcullis+json; version=2' } });
    expect(future.status).toBe(406);
  });

  it('builds the response headers the contract declares from their examples', async () => {
    const res = await fetch(`${baseUrl}/v1/posts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"title":"T","body":"B","status":"draft"}' });
    expect(res.status).toBe(201);
    expect(Object.fromEntries([...res.headers].filter(([name]) => !['date', 'connection', 'keep-alive', 'content-length'].includes(name)))).toEqual({
      etag: '"5d41402abc4b2a76b9719d911017c592"',
      location: '/v1/posts/018f6b2b11aa4c3d8e9f0a1b2c3d4e5f',
      'idempotent-replayed': 'true',
      'ratelimit-policy': '"default";q=600;w=60',
      ratelimit: '"default";r=599;t=60',
      'content-type': 'application/json; charset=utf-8',
    });
  });

  it('serves a typed client as the server does', async () => {
    const client = createPortcullisClient({ baseUrl });
    const { data, response } = await client.GET('/v1/posts/{postId}', { params: { path: { postId: 'any' }, query: { expand: ['author'] } } });
    expect(response.status).toBe(200);
    expect(data).toEqual(contractExample('/v1/posts/{postId}', 'GET', '200'));
  });

  it('answers the status and the named example a request prefers', async () => {
    const notFound = await fetch(`${baseUrl}/v1/posts/x`, { headers: { prefer: 'code=404' } });
    expect([notFound.status, await notFound.json()]).toEqual([404, { error: { code: 'NOT_FOUND', message: 'The resource does not exist.' } }]);
    const forbidden = await fetch(`${baseUrl}/v1/posts/x`, { headers: { prefer: 'code=403, example=forbidden' } });
    expect([forbidden.status, forbidden.headers.get('www-authenticate'), await forbidden.json()]).toEqual([
      403,
      'Bearer realm="portcullis", error="invalid_token"',
      { error: { code: 'FORBIDDEN', message: 'Your role does not permit this action.' } },
    ]);
    const undeclared = await fetch(`${baseUrl}/v1/posts/x`, { headers: { prefer: 'code=409' } });
    expect([undeclared.status, await undeclared.json()]).toEqual([
      400,
      {
        error: {
          code: 'VALIDATION_FAILED',
          message: 'getPost declares no 409 response.',
          details: [{ path: '/headers/prefer', message: 'must name one of 200, 304, 400, 401, 403, 404, 406, 429, 500, 503' }],
        },
      },
    ]);
  });

  describe('refuses what the server refuses, with the same answer', () => {
    let server: TestApp;
    let token: string;
    beforeAll(async () => {
      server = await startTestApp('sqlite');
      token = await (await server.createUser('admin')).token();
    });
    afterAll(async () => server?.close());

    const refused: [string, { method?: string; url: string; headers?: Record<string, string>; payload?: string }][] = [
      ['a missing body property', { method: 'POST', url: '/v1/posts', headers: { 'content-type': 'application/json' }, payload: '{"title":"T"}' }],
      ['an unknown body property', { method: 'POST', url: '/v1/posts', headers: { 'content-type': 'application/json' }, payload: '{"title":"T","body":"B","status":"draft","authorId":"x"}' }],
      ['a token in the body', { method: 'POST', url: '/v1/posts', headers: { 'content-type': 'application/json' }, payload: '{"title":"T","body":"B","status":"draft","access_token":"x"}' }],
      ['malformed JSON', { method: 'POST', url: '/v1/posts', headers: { 'content-type': 'application/json' }, payload: '{"title":' }],
      ['a body that is not JSON', { method: 'POST', url: '/v1/posts', headers: { 'content-type': 'text/plain' }, payload: 'title' }],
      ['a limit out of range', { url: '/v1/users?limit=1000' }],
      ['an unknown query parameter', { url: '/v1/posts?sort=title' }],
      ['a number that is not a decimal numeral', { url: '/v1/posts?limit=0x10' }],
      ['a NUL character in the query', { url: '/v1/posts?authorId=a%00b' }],
      ['an invalid path parameter', { url: '/v1/posts/not%20an%20id' }],
      ['an unknown API version', { url: '/v1/posts', headers: { accept: 'application/vnd.portcullis+json; version=2' } }],
    ];

    it.each(refused)('%s', async (_name, request) => {
      const fromMock = await mock.inject({ method: (request.method ?? 'GET') as 'GET', url: request.url, headers: request.headers ?? {}, payload: request.payload });
      const fromServer = await server.request({ method: request.method, url: request.url, token, headers: request.headers ?? {}, payload: request.payload });
      expect(fromServer.statusCode).toBeGreaterThanOrEqual(400);
      expect([fromMock.statusCode, fromMock.headers['content-type'], JSON.parse(fromMock.body)]).toEqual([fromServer.statusCode, fromServer.headers['content-type'], fromServer.json()]);
    });
  });
});
