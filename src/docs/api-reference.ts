import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors/registry.js';
import { rateLimitHeaders, type RateLimitPolicy } from '../limits/rate-limit.js';
import { addressKey } from '../limits/address-key.js';
import { entityTag, matchesAny } from '../rest/entity-tag.js';
import { sendRestError } from '../rest/send-error.js';

const require = createRequire(import.meta.url);

/** Redoc's standalone bundle (React included), served by this server: the page loads nothing from elsewhere. */
const REDOC_BUNDLE = require.resolve('redoc/bundles/redoc.standalone.js');
export const REDOC_PATH = '/docs/redoc.standalone.js';

/**
 * Only this server's own scripts, styles and data. Redoc's styled-components write `<style>` elements and
 * its search index runs in a worker it starts from a `blob:` URL, hence those two allowances, on /docs only.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  'worker-src blob:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

// Redoc reads the published contract from GET /v1/rest, as any client does.
const page = (graphiql: boolean) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Portcullis API reference</title>
<link rel="icon" href="data:,">
<style>body { margin: 0 }</style>
</head>
<body>
${graphiql ? '<nav style="padding: 8px 16px; font: 14px sans-serif"><a href="/graphiql">GraphQL: explore it in GraphiQL</a></nav>\n' : ''}<redoc spec-url="/v1/rest"></redoc>
<script src="${REDOC_PATH}"></script>
</body>
</html>
`;

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': DOCS_CSP,
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

/**
 * Redoc's side menu shows Redocly's logo from their CDN, hiding it when it fails to load. It is pointed at an
 * empty `data:` image instead, which fails at once, so the page never asks another host for anything.
 */
const REMOTE_LOGO = '"https://cdn.redoc.ly/redoc/logo-mini.svg"';
const NO_IMAGE = '"data:,"';

/** An onRequest hook: the request spends the caller's address's anonymous budget; 429 once it is spent. */
export function spendAnonymousBudget(budget: RateLimitPolicy) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const limit = await budget.consume(addressKey(request.ip));
    reply.headers(rateLimitHeaders(limit));
    if (!limit.allowed) {
      const retryAfter = String(limit.resetSeconds);
      return sendRestError(reply, new ApiError('RATE_LIMITED', `Too many requests; retry in ${retryAfter} s.`, { headers: { 'retry-after': retryAfter } }));
    }
    return undefined;
  };
}

/**
 * `GET /docs`: the API reference, rendered in the browser by Redoc from the published contract. Its two
 * requests spend the caller's address's anonymous budget, like any request without a token.
 */
export async function registerApiReference(app: FastifyInstance, budget: RateLimitPolicy, options: { graphiql: boolean }): Promise<void> {
  const PAGE = page(options.graphiql);
  const bundle = Buffer.from(fs.readFileSync(REDOC_BUNDLE, 'utf8').replaceAll(REMOTE_LOGO, NO_IMAGE));
  const bundleTag = entityTag(bundle);
  await app.register(async (scope) => {
    scope.addHook('onRequest', spendAnonymousBudget(budget));
    scope.get('/docs', async (_request, reply) => reply.headers(PAGE_HEADERS).send(PAGE));
    scope.get(REDOC_PATH, async (request, reply) => {
      reply.headers({ 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, no-cache', etag: bundleTag });
      if (matchesAny(request.headers['if-none-match'], bundleTag, true)) return reply.code(304).send();
      return reply.send(bundle);
    });
  });
}
