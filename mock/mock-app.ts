import fs from 'node:fs';
import path from 'node:path';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { OpenAPIBackend, Operation } from 'openapi-backend';
import { routes } from '../generated/routes.js';
import { ApiError } from '../src/errors/registry.js';
import { redactUrl } from '../src/logging/redact-url.js';
import { PACKAGE_ROOT } from '../src/package-root.js';
import { AllowedMethods } from '../src/rest/method-not-allowed.js';
import { fromFastifyError } from '../src/rest/error-response.js';
import { parseJsonBody } from '../src/rest/json-body.js';
import { mergeBracketExpand, openExchange } from '../src/rest/plugin.js';
import type { RestExchange } from '../src/rest/rest-exchange.js';
import { checkBodyType, MERGE_PATCH_TYPE, negotiate, rejectBodyToken, validate } from '../src/rest/rest-stages.js';
import { sendRestError } from '../src/rest/send-error.js';
import { rejectInvalidText } from '../src/rest/text-integrity.js';
import { VENDOR_TYPE } from '../src/rest/versioning.js';
import { contractBackend } from './contract-backend.js';

/**
 * The REST pipeline's checks of the request itself, in its order (src/rest/rest-pipeline.ts): what the
 * server refuses before any handler runs, the mock refuses with the same answer. Tokens are not checked:
 * the mock has no authorization server.
 */
const REQUEST_CHECKS: readonly ((ex: RestExchange) => void)[] = [negotiate, rejectBodyToken, rejectInvalidText, checkBodyType, validate];

/** Added to every response by the published contract for CORS, which the mock does not do. */
const CORS_HEADER = 'access-control-allow-origin';

/** `Prefer: code=404, example=forbidden` picks a response and an example by name (as other OpenAPI mocks do). */
function preference(header: string | string[] | undefined): { code?: number; example?: string } {
  const preferences = new Map<string, string>(
    String(header ?? '')
      .split(',')
      .map((part): [string, string] => {
        const [name = '', value = ''] = part.split('=').map((s) => s.trim());
        return [name, value];
      }),
  );
  const code = preferences.get('code');
  const example = preferences.get('example');
  return { ...(code !== undefined ? { code: Number(code) } : {}), ...(example !== undefined ? { example } : {}) };
}

/** Per status, the headers each response of an operation declares, with the contract's example values. */
function declaredHeaders(operation: Operation): Map<number, Record<string, string>> {
  return new Map(
    Object.entries(operation.responses ?? {}).map(([status, response]) => {
      const headers = Object.entries((response as { headers?: Record<string, { example?: unknown }> }).headers ?? {}).filter(([name]) => name.toLowerCase() !== CORS_HEADER);
      const values = headers.map(([name, header]): [string, string] => {
        if (header.example === undefined) throw new Error(`${operation.operationId} ${status}: header ${name} has no example for the mock to send`);
        return [name.toLowerCase(), String(header.example)];
      });
      return [Number(status), Object.fromEntries(values)];
    }),
  );
}

/**
 * Serves every operation of the published contract from its examples (openapi-backend's mocking picks the
 * response and its example, or a body generated from the schema), after the server's own request checks.
 */
export async function buildMockApp(options: { bodyLimit: number; logger?: boolean }): Promise<FastifyInstance> {
  const api: OpenAPIBackend = await contractBackend();
  const logger = options.logger
    ? {
        // As the server logs requests: no Authorization header or cookies, credential-like query values masked.
        redact: ['req.headers.authorization', 'req.headers.cookie'],
        serializers: { req: (request: FastifyRequest) => ({ method: request.method, url: redactUrl(request.url), remoteAddress: request.ip }) },
      }
    : false;
  const app = Fastify({ bodyLimit: options.bodyLimit, logger, routerOptions: { ignoreTrailingSlash: true } });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(['application/json', VENDOR_TYPE, MERGE_PATCH_TYPE], { parseAs: 'buffer' }, parseJsonBody);
  app.setErrorHandler((error, _request, reply) => sendRestError(reply, fromFastifyError(error)));
  // As the server answers: 405 with `Allow` for a path of the contract asked with another method.
  const allowedMethods = new AllowedMethods();
  app.setNotFoundHandler((request, reply) => {
    const allow = allowedMethods.for(request.url.split('?', 1)[0]!);
    return sendRestError(
      reply,
      allow.length > 0
        ? new ApiError('METHOD_NOT_ALLOWED', `${request.method} is not allowed here; use ${allow.join(', ')}.`, { headers: { allow: allow.join(', ') } })
        : new ApiError('NOT_FOUND', 'There is no such endpoint.'),
    );
  });
  const published = fs.readFileSync(path.join(PACKAGE_ROOT, 'generated/openapi.json'), 'utf8');

  for (const route of routes) {
    const operation = api.router.getOperation(route.operationId)!;
    const headers = declaredHeaders(operation);
    const versioned = route.path.replace(/\{([^}]+)\}/g, ':$1');
    // The paths the server serves: versioned, and unversioned when the contract gives one (Accept's version).
    const urls = route.unversionedUrl === null ? [versioned] : [versioned, route.unversionedUrl];
    for (const url of urls) allowedMethods.add(route.method, url);
    for (const url of urls) app.route({
      method: route.method,
      url,
      handler: async (request, reply) => {
        const ex = openExchange(request, route);
        mergeBracketExpand(ex.query);
        ex.body = request.body;
        for (const check of REQUEST_CHECKS) check(ex);
        const wanted = preference(request.headers.prefer);
        if (wanted.code !== undefined && !operation.responses?.[String(wanted.code)]) {
          throw new ApiError('VALIDATION_FAILED', `${route.operationId} declares no ${wanted.code} response.`, {
            details: [{ path: '/headers/prefer', message: `must name one of ${Object.keys(operation.responses ?? {}).join(', ')}` }],
          });
        }
        // The contract itself is no example: the mock serves the published one, as the server does.
        if (route.operationId === 'getRestContract' && wanted.code === undefined) {
          return reply.code(200).headers(headers.get(200)!).type('application/json; charset=utf-8').send(published);
        }
        const { status, mock } = api.mockResponseForOperation(route.operationId, wanted);
        reply.code(status).headers(headers.get(status)!);
        const content = (operation.responses?.[String(status)] as { content?: Record<string, unknown> }).content;
        if (!content) return reply.send();
        const mediaType = Object.keys(content)[0]!;
        return reply.type(`${mediaType}; charset=utf-8`).send(typeof mock === 'string' ? mock : JSON.stringify(mock));
      },
    });
  }
  await app.ready();
  return app;
}
