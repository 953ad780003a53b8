import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { serveMetrics } from '../../src/metrics/metrics.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { createPost } from '../access/support.js';

/** The value of one sample of the exposition text, or undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const rendered = Object.entries(labels).map(([key, value]) => `${key}="${value}"`).join(',');
  const line = text.split('\n').find((l) => l.startsWith(rendered ? `${name}{${rendered}} ` : `${name} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('Prometheus metrics on their own listener', () => {
  let t: TestApp;
  let server: Server;
  let base: string;

  beforeAll(async () => {
    t = await startTestApp('sqlite', { RATE_LIMIT_ANONYMOUS_MAX: '2', RATE_LIMIT_MAX: '1000' });
    server = await serveMetrics(t.app.metrics.registry, '127.0.0.1', 0);
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server?.close();
    await t?.close();
  });

  it('counts requests, decisions, rate-limit refusals, tokens and deprecated uses, and shows the audit queue', async () => {
    const member = await t.createUser('member');
    const token = await member.token();
    const post = await createPost(t, token, { title: 'Counted', status: 'published' });
    for (let i = 0; i < 3; i++) expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200);
    expect((await t.request({ url: `/v1/posts/${post.id}`, token: 'not-a-token' })).statusCode).toBe(401);
    for (let i = 0; i < 3; i++) await t.app.fastify.inject({ url: '/v1/rest', remoteAddress: '10.9.8.7' });
    await t.adminClientToken();
    const graphql = await t.request({ method: 'POST', url: '/graphql', token, body: { query: `{ post(id: "${post.id}") { published } }` } });
    expect(graphql.statusCode).toBe(200);

    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await res.text();
    expect(sample(text, 'portcullis_requests_total', { interface: 'rest', operation: 'listPosts', status: '200' })).toBe(3);
    expect(sample(text, 'portcullis_requests_total', { interface: 'rest', operation: 'getPost', status: '401' })).toBe(1);
    expect(sample(text, 'portcullis_requests_total', { interface: 'rest', operation: 'getRestContract', status: '429' })).toBe(1);
    expect(sample(text, 'portcullis_requests_total', { interface: 'graphql', operation: 'graphql', status: '200' })).toBe(1);
    expect(sample(text, 'portcullis_requests_total', { interface: 'oauth', operation: '/oauth/token', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'portcullis_request_duration_seconds_count', { interface: 'rest', operation: 'listPosts' })).toBe(3);
    expect(sample(text, 'portcullis_policy_decisions_total', { interface: 'rest', decision: 'allow', reason: 'granted' })).toBeGreaterThanOrEqual(4);
    expect(sample(text, 'portcullis_policy_decisions_total', { interface: 'rest', decision: 'deny', reason: 'authentication' })).toBe(1);
    expect(sample(text, 'portcullis_policy_decisions_total', { interface: 'graphql', decision: 'allow', reason: 'resource' })).toBe(1);
    expect(sample(text, 'portcullis_rate_limited_total', { policy: 'anonymous' })).toBe(1);
    expect(sample(text, 'portcullis_tokens_issued_total', { grant_type: 'client_credentials' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'portcullis_deprecated_uses_total', { interface: 'graphql', name: 'Post.published' })).toBe(1);
    expect(sample(text, 'portcullis_audit_queue_depth')).toBeGreaterThanOrEqual(0);
    // Labels are operations and statuses: no token, id or address ever appears.
    expect(text).not.toContain(token);
    expect(text).not.toContain(post.id);
    expect(text).not.toContain('10.9.8.7');
  });

  it('counts requests refused before routing (a URL that cannot be decoded) as unmatched', async () => {
    const before = sample(await (await fetch(`${base}/metrics`)).text(), 'portcullis_requests_total', { interface: 'other', operation: 'unmatched', status: '400' }) ?? 0;
    for (const url of ['/v1/posts/%ZZ', `/v1/posts/${'a'.repeat(300)}`]) expect((await t.app.fastify.inject({ url })).statusCode).toBe(400);
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(sample(text, 'portcullis_requests_total', { interface: 'other', operation: 'unmatched', status: '400' })).toBe(before + 2);
    expect(sample(text, 'portcullis_request_duration_seconds_count', { interface: 'other', operation: 'unmatched' })).toBeGreaterThanOrEqual(2);
  });

  it('answers nothing but GET /metrics', async () => {
    expect((await fetch(`${base}/`)).status).toBe(404);
    expect((await fetch(`${base}/metrics`, { method: 'POST' })).status).toBe(404);
  });
});

describe('METRICS_PORT and METRICS_HOST', () => {
  const env = { DATA_DIR: '/tmp/portcullis-metrics-config', KEY_ENCRYPTION_SECRET: 'test-key-encryption-secret-0123456789abcdef' };
  it('is off unless METRICS_PORT is set, and on loopback unless METRICS_HOST says otherwise', () => {
    expect(loadConfig(env).metrics).toEqual({ port: null, host: '127.0.0.1' });
    expect(loadConfig({ ...env, METRICS_PORT: '9464' }).metrics).toEqual({ port: 9464, host: '127.0.0.1' });
    expect(loadConfig({ ...env, METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' }).metrics).toEqual({ port: 9464, host: '0.0.0.0' });
    expect(() => loadConfig({ ...env, METRICS_PORT: 'ninety' })).toThrow(/METRICS_PORT/);
  });
});
