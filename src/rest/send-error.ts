import type { FastifyReply } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import { isRefusal, renderRestError } from '../errors/rest-renderer.js';
import { bodyInMediaType } from './versioning.js';

/**
 * Sends any error in the API's shape; errors are never cached, and a 5xx's cause goes to the log only (a
 * refusal the server decided on is logged once where its condition begins, not once per request).
 * `mediaType` is the vendor media type the client asked for, echoed exactly (versioning.ts).
 */
export function sendRestError(reply: FastifyReply, error: unknown, mediaType: string | null = null): FastifyReply {
  const rendered = renderRestError(error);
  if (rendered.status >= 500 && !isRefusal(error)) reply.log.error({ err: error }, 'request failed');
  reply.code(rendered.status).headers(rendered.headers).header('cache-control', 'no-store');
  // Refused before its body arrived whole (a 401 is decided before the body is read): the connection ends
  // with this answer. Kept open, it would wait for the rest of a body that may never come, and then answer
  // the same request a second time, with a 408.
  const raw = reply.request.raw;
  if (!raw.complete && carriesBody(raw.headers)) reply.header('connection', 'close');
  if (mediaType === null) return reply.send(rendered.body);
  return reply.type(mediaType).send(bodyInMediaType(JSON.stringify(rendered.body), mediaType));
}

function carriesBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
