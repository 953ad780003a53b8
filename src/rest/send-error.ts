import type { FastifyReply } from 'fastify';
import { renderRestError } from '../errors/rest-renderer.js';

/**
 * Sends any error in the API's shape; errors are never cached, and a 5xx's cause goes to the log only.
 * `mediaType` is the vendor media type the client asked for: the body is then sent as bytes, so that
 * Fastify does not re-render the type (representation.ts).
 */
export function sendRestError(reply: FastifyReply, error: unknown, mediaType: string | null = null): FastifyReply {
  const rendered = renderRestError(error);
  if (rendered.status >= 500) reply.log.error({ err: error }, 'request failed');
  reply.code(rendered.status).headers(rendered.headers).header('cache-control', 'no-store');
  if (mediaType === null) return reply.send(rendered.body);
  return reply.type(mediaType).send(Buffer.from(JSON.stringify(rendered.body)));
}
