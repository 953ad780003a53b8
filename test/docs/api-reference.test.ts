import fs from 'node:fs';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCS_CSP, REDOC_PATH } from '../../src/docs/api-reference.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

// The API reference over HTTP; test/e2e/browser/api-reference.test.ts renders it in Chromium.

describe('GET /docs', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('sqlite');
  });
  afterAll(async () => t?.close());

  it('serves the page that renders the published contract, under a CSP that allows nothing remote', async () => {
    const res = await t.request({ url: '/docs' });
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject({
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': DOCS_CSP,
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-cache',
      'x-content-type-options': 'nosniff',
    });
    expect(DOCS_CSP).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; " +
        "connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(res.body).toBe(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Portcullis API reference</title>
<link rel="icon" href="data:,">
<style>body { margin: 0 }</style>
</head>
<body>
<nav style="padding: 8px 16px; font: 14px sans-serif"><a href="/graphiql">GraphQL: explore it in GraphiQL</a></nav>
<redoc spec-url="/v1/rest"></redoc>
<script src="/docs/redoc.standalone.js"></script>
</body>
</html>
`);
  });

  it('serves Redoc from this server, with no address of another host left for the page to load', async () => {
    const original = fs.readFileSync(new URL('../../node_modules/redoc/bundles/redoc.standalone.js', import.meta.url), 'utf8');
    const res = await t.request({ url: REDOC_PATH });
    const etag = `"${createHash('sha256').update(res.body).digest('base64url').slice(0, 27)}"`;
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject({ 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, no-cache', etag });
    expect(original).toContain('src:"https://cdn.redoc.ly/redoc/logo-mini.svg"');
    expect(res.body).toBe(original.replaceAll('"https://cdn.redoc.ly/redoc/logo-mini.svg"', '"data:,"'));

    for (const ifNoneMatch of [etag, `"other", W/${etag}`]) {
      const again = await t.request({ url: REDOC_PATH, headers: { 'if-none-match': ifNoneMatch } });
      expect(again.statusCode).toBe(304);
      expect(again.headers).toMatchObject({ etag, 'cache-control': 'public, no-cache' });
      expect(again.body).toBe('');
    }
    expect((await t.request({ url: REDOC_PATH, headers: { 'if-none-match': '"other"' } })).statusCode).toBe(200);
  });

  it("spends the address's anonymous budget, and answers 429 once it is spent", async () => {
    const limited = await startTestApp('sqlite', { RATE_LIMIT_ANONYMOUS_MAX: '2' });
    try {
      const first = await limited.request({ url: '/docs' });
      expect([first.statusCode, first.headers['ratelimit-policy'], first.headers.ratelimit]).toEqual([200, '"anonymous";q=2;w=60', '"anonymous";r=1;t=60']);
      expect((await limited.request({ url: REDOC_PATH })).statusCode).toBe(200);
      const refused = await limited.request({ url: '/docs' });
      expect(refused.statusCode).toBe(429);
      expect(refused.headers).toMatchObject({ 'retry-after': '60', 'ratelimit-policy': '"anonymous";q=2;w=60', ratelimit: '"anonymous";r=0;t=60', 'cache-control': 'no-store' });
      expect(refused.headers['content-security-policy']).toBeUndefined();
      expect(refused.json()).toEqual({ error: { code: 'RATE_LIMITED', message: 'Too many requests; retry in 60 s.' } });
    } finally {
      await limited.close();
    }
  });

  it('the page is only a page: other methods are refused with Allow', async () => {
    const res = await t.request({ method: 'POST', url: '/docs', body: {} });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    expect(res.json()).toEqual({ error: { code: 'METHOD_NOT_ALLOWED', message: 'POST is not allowed here; use GET, HEAD.' } });
  });
});
