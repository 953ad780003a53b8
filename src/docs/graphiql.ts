import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { RateLimitPolicy } from '../limits/rate-limit.js';
import { entityTag, matchesAny } from '../rest/entity-tag.js';
import { spendAnonymousBudget } from './api-reference.js';

const require = createRequire(import.meta.url);

/** A file of an installed package, by its path in the package (React's `exports` do not list its UMD builds). */
export function packageFile(name: string, file: string): string {
  return path.join(path.dirname(require.resolve(`${name}/package.json`)), file);
}

export const GRAPHIQL_PATH = '/graphiql';

/**
 * GraphiQL's browser build and the React it runs on, from this server's own packages: the page loads
 * nothing from elsewhere (GraphiQL's usual page, and Mercurius' bundled one, load from a CDN).
 */
const ASSETS: Readonly<Record<string, { file: string; type: string }>> = {
  'react.production.min.js': { file: packageFile('react', 'umd/react.production.min.js'), type: 'text/javascript' },
  'react-dom.production.min.js': { file: packageFile('react-dom', 'umd/react-dom.production.min.js'), type: 'text/javascript' },
  'graphiql.min.js': { file: packageFile('graphiql', 'graphiql.min.js'), type: 'text/javascript' },
  'graphiql.min.css': { file: packageFile('graphiql', 'graphiql.min.css'), type: 'text/css' },
};

/**
 * The page's own start: GraphiQL on POST /graphql. A token goes in the Headers tab
 * (`{ "Authorization": "Bearer ..." }`; introspection needs the `read:schema` scope); GraphiQL keeps it in
 * memory only (headers are not persisted).
 */
const START = `'use strict';
const fetcher = GraphiQL.createFetcher({ url: new URL('/graphql', location.href).href });
ReactDOM.createRoot(document.getElementById('graphiql')).render(React.createElement(GraphiQL, { fetcher, shouldPersistHeaders: false }));
`;

/**
 * Only this server's scripts, styles and data. GraphiQL's editors set inline styles, hence that allowance,
 * on /graphiql only; the page talks to this server alone (`connect-src 'self'`).
 */
export const GRAPHIQL_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Portcullis GraphiQL</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${GRAPHIQL_PATH}/graphiql.min.css">
<style>html, body, #graphiql { height: 100%; margin: 0 }</style>
</head>
<body>
<div id="graphiql"></div>
<script src="${GRAPHIQL_PATH}/react.production.min.js"></script>
<script src="${GRAPHIQL_PATH}/react-dom.production.min.js"></script>
<script src="${GRAPHIQL_PATH}/graphiql.min.js"></script>
<script src="${GRAPHIQL_PATH}/start.js"></script>
</body>
</html>
`;

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': GRAPHIQL_CSP,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

/**
 * `GET /graphiql` (GRAPHIQL, on by default outside production): GraphiQL for POST /graphql, from local
 * files. Its requests spend the caller's address's anonymous budget, like any request without a token.
 */
export async function registerGraphiql(app: FastifyInstance, budget: RateLimitPolicy): Promise<void> {
  const files = new Map<string, { body: Buffer; type: string; tag: string }>();
  for (const [name, asset] of Object.entries(ASSETS)) {
    const body = fs.readFileSync(asset.file);
    files.set(name, { body, type: `${asset.type}; charset=utf-8`, tag: entityTag(body) });
  }
  const start = Buffer.from(START);
  files.set('start.js', { body: start, type: 'text/javascript; charset=utf-8', tag: entityTag(start) });

  await app.register(async (scope) => {
    scope.addHook('onRequest', spendAnonymousBudget(budget));
    scope.get(GRAPHIQL_PATH, async (_request, reply) => reply.headers(PAGE_HEADERS).send(PAGE));
    for (const [name, file] of files) {
      scope.get(`${GRAPHIQL_PATH}/${name}`, async (request, reply) => {
        reply.headers({ 'content-type': file.type, 'cache-control': 'public, no-cache', etag: file.tag });
        if (matchesAny(request.headers['if-none-match'], file.tag, true)) return reply.code(304).send();
        return reply.send(file.body);
      });
    }
  });
}
