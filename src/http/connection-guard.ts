import { addressKey } from '../limits/address-key.js';
import http from 'node:http';
import type net from 'node:net';
import { ERROR_CODES, type ErrorCode } from '../errors/registry.js';

/**
 * What happens on a connection before Fastify sees a request: malformed or oversized HTTP, a request that
 * does not arrive in time, and too many connections from one address. Each refusal is written in the
 * API's error shape with the headers every answer carries, then the connection is closed.
 */

/** Node's parser errors for a request it cannot read (RFC 9112 §6.3: e.g. Content-Length with chunked). */
function codeFor(error: NodeJS.ErrnoException): ErrorCode {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'REQUEST_TIMEOUT';
  if (error.code === 'HPE_HEADER_OVERFLOW') return 'HEADERS_TOO_LARGE';
  return 'VALIDATION_FAILED';
}

const MESSAGES: Partial<Record<ErrorCode, string>> = {
  REQUEST_TIMEOUT: 'The request did not arrive whole in time.',
  HEADERS_TOO_LARGE: 'The request headers are too large.',
  VALIDATION_FAILED: 'The request is not valid HTTP/1.1.',
  RATE_LIMITED: 'Too many open connections from this address.',
  METHOD_NOT_ALLOWED: 'CONNECT is not served here: this is not a proxy.',
};

/** A whole HTTP/1.1 response in the API's error shape, closing the connection. */
export function rawErrorResponse(code: ErrorCode, headers: Readonly<Record<string, string>>): string {
  const { status } = ERROR_CODES[code];
  const body = JSON.stringify({ error: { code, message: MESSAGES[code] ?? ERROR_CODES[code].message } });
  const lines = [
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    'cache-control: no-store',
    'connection: close',
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

/** Fastify's `clientErrorHandler`: Node's own 400/408/431 answers, in the API's shape. */
export function clientErrorHandler(headers: Readonly<Record<string, string>>) {
  return (error: NodeJS.ErrnoException, socket: net.Socket): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    // A response already under way cannot be replaced; the connection just ends.
    const started = (socket as net.Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    if (socket.writable && !started) socket.end(rawErrorResponse(codeFor(error), headers));
    else socket.destroy();
  };
}

/**
 * At most `max` open connections per remote address (the socket's, not X-Forwarded-For: behind a proxy
 * every connection comes from the proxy, which limits on its own, so the cap is off there). Over the cap a
 * connection gets one 429 and is closed before anything is read from it.
 */
export function capConnectionsPerAddress(server: net.Server, max: number, headers: Readonly<Record<string, string>>): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: net.Socket) => {
    const address = addressKey(socket.remoteAddress ?? '');
    const count = (open.get(address) ?? 0) + 1;
    if (count > max) {
      socket.end(rawErrorResponse('RATE_LIMITED', { ...headers, 'retry-after': '1' }));
      return;
    }
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
}
