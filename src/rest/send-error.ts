import type { FastifyReply } from 'fastify';
import { isRefusal, renderRestError } from '../errors/rest-renderer.js';
import { closeIfBodyUnread } from '../http/unread-body.js';
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
  // Sent directly by the pipeline's refusals, not only from an error handler (whose answers the app's
  // onError hook covers).
  closeIfBodyUnread(reply);
  if (mediaType === null) return reply.send(rendered.body);
  return reply.type(mediaType).send(bodyInMediaType(JSON.stringify(rendered.body), mediaType));
}
