import type { FastifyReply } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * An answer given before the request's body arrived whole (a 401 or a 429 is decided before the body is
 * read) ends its connection. Kept open, the connection would wait for the rest of a body that may never
 * come, and then answer the same request a second time, with a 408 once REQUEST_TIMEOUT_SECONDS passed.
 */
export function closeIfBodyUnread(reply: FastifyReply): void {
  const raw = reply.request.raw;
  if (!raw.complete && carriesBody(raw.headers)) reply.header('connection', 'close');
}

function carriesBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
