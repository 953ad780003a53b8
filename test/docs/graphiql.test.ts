import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GRAPHIQL_CSP, packageFile } from '../../src/docs/graphiql.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

// GraphiQL over HTTP; test/e2e/browser/graphiql.test.ts renders it in Chromium.

describe('GET /graphiql', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('sqlite');
  });
  afterAll(async () => t?.close());

  it('serves the page under a CSP that allows nothing remote, every script and style from this server', async () => {
    const res = await t.request({ url: '/graphiql' });
    expect(res.statusCode).toBe(200);
    expect(res.headers).toMatchObject({
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': GRAPHIQL_CSP,
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-cache',
    });
    expect(GRAPHIQL_CSP).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    const sources = [...res.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]);
    expect(sources).toEqual(['data:,', '/graphiql/graphiql.min.css', '/graphiql/react.production.min.js', '/graphiql/react-dom.production.min.js', '/graphiql/graphiql.min.js', '/graphiql/start.js']);
  });

  it('serves GraphiQL and React from the installed packages, with entity tags', async () => {
    const files: [string, string, string][] = [
      ['/graphiql/graphiql.min.js', packageFile('graphiql', 'graphiql.min.js'), 'text/javascript; charset=utf-8'],
      ['/graphiql/graphiql.min.css', packageFile('graphiql', 'graphiql.min.css'), 'text/css; charset=utf-8'],
      ['/graphiql/react.production.min.js', packageFile('react', 'umd/react.production.min.js'), 'text/javascript; charset=utf-8'],
      ['/graphiql/react-dom.production.min.js', packageFile('react-dom', 'umd/react-dom.production.min.js'), 'text/javascript; charset=utf-8'],
    ];
    for (const [url, file, type] of files) {
      const res = await t.request({ url });
      expect({ url, status: res.statusCode, type: res.headers['content-type'], same: res.body === fs.readFileSync(file, 'utf8') }).toEqual({ url, status: 200, type, same: true });
      const etag = String(res.headers.etag);
      expect((await t.request({ url, headers: { 'if-none-match': etag } })).statusCode).toBe(304);
    }
    const start = await t.request({ url: '/graphiql/start.js' });
    expect(start.statusCode).toBe(200);
    expect(start.body).toContain("GraphiQL.createFetcher({ url: new URL('/graphql', location.href).href })");
  });

  it('is off in production unless GRAPHIQL turns it on, and /docs links it only when on', async () => {
    const off = await startTestApp('sqlite', { GRAPHIQL: 'false' });
    try {
      expect((await off.request({ url: '/graphiql' })).statusCode).toBe(404);
      expect((await off.request({ url: '/graphiql/graphiql.min.js' })).statusCode).toBe(404);
      expect((await off.request({ url: '/docs' })).body).not.toContain('/graphiql');
    } finally {
      await off.close();
    }
    expect((await t.request({ url: '/docs' })).body).toContain('<a href="/graphiql">');
  });
});
