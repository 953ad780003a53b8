import diagnostics from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';

/**
 * A caller the pipeline refuses (no token, a token in the URL, no permission) is refused before the route's
 * handler runs, whatever the method: tracing tools that follow Fastify's handler (its `fastify.request.handler`
 * channel) see only requests that were let through, and a refusal is not counted as a handler's error.
 */
describe('refusals before the handler', () => {
  let t: TestApp;
  const seen: string[] = [];
  const subscribers = {
    start: (message: unknown) => seen.push(`start ${(message as { request: { url: string } }).request.url}`),
    end: () => {},
    asyncStart: () => {},
    asyncEnd: () => {},
    error: (message: unknown) => seen.push(`error ${(message as { request: { url: string } }).request.url}`),
  };
  const channel = diagnostics.tracingChannel('fastify.request.handler');

  beforeAll(async () => {
    t = await startTestApp('sqlite');
    channel.subscribe(subscribers);
  });
  afterAll(async () => {
    channel.unsubscribe(subscribers);
    await t.close();
  });

  it.each([
    ['GET', '/v1/posts', 401],
    ['HEAD', '/v1/posts', 401],
    ['GET', '/v1/posts?access_token=x', 400],
    ['DELETE', '/v1/posts/00000000000000000000000000000000', 401],
  ])('%s %s: %i, the handler never reached', async (method, url, status) => {
    seen.length = 0;
    const res = await t.request({ method, url });
    expect(res.statusCode).toBe(status);
    expect(seen).toEqual([]);
  });

  it('sees the handler of a request that was let through', async () => {
    seen.length = 0;
    const member = await t.createUser('member');
    const res = await t.request({ url: '/v1/posts', token: await member.token() });
    expect(res.statusCode).toBe(200);
    expect(seen).toEqual(['start /v1/posts']);
  });
});
