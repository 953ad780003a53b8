import type { FastifyReply } from 'fastify';
import { renderRestError } from '../errors/rest-renderer.js';

/** Sends any error in the API's shape; errors are never cached, and a 5xx's cause goes to the log only. */
export function sendRestError(reply: FastifyReply, error: unknown): FastifyReply {
  const rendered = renderRestError(error);
  if (rendered.status >= 500) reply.log.error({ err: error }, 'request failed');
  return reply.code(rendered.status).headers(rendered.headers).header('cache-control', 'no-store').send(rendered.body);
}
