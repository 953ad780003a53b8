import type { FastifyReply, FastifyRequest } from 'fastify';
import { containsInvalidText } from '../../rest/text-integrity.js';
import { OAuthError } from '../oauth-error.js';
import { errorPage } from '../pages/error-page.js';
import type { Page } from '../pages/html.js';

/** Headers of every answer of the pages, redirects included: no framing, no Referer, never cached. */
const REDIRECT_HEADERS = { 'x-frame-options': 'DENY', 'referrer-policy': 'no-referrer', 'cache-control': 'no-store' };

function withCookies(reply: FastifyReply, cookies: readonly (string | null)[]): FastifyReply {
  const set = cookies.filter((cookie): cookie is string => cookie !== null);
  if (set.length > 0) reply.header('set-cookie', set);
  return reply;
}

export function sendPage(reply: FastifyReply, page: Page, cookies: readonly (string | null)[] = []): FastifyReply {
  return withCookies(reply, cookies).status(page.status).headers(page.headers).send(page.body);
}

/** 303 See Other: after a form post the browser follows with GET (RFC 9700 §4.12: never 307). */
export function redirect(reply: FastifyReply, location: string, cookies: readonly (string | null)[] = []): FastifyReply {
  return withCookies(reply, cookies).status(303).headers(REDIRECT_HEADERS).header('location', location).send();
}

/** Longer than any valid request of the pages (each parameter is at most 2048 characters). */
const MAX_REPEATED_QUERY = 8192;

/**
 * Sends a form post on as the same request by GET (303 keeps the browser on this server). The pages use it
 * when a post arrives without the browser-binding cookie, which a cross-site post never carries.
 */
export function repeatAsGet(reply: FastifyReply, path: string, params: URLSearchParams): FastifyReply {
  const query = params.toString();
  if (query.length > MAX_REPEATED_QUERY) return sendPage(reply, errorPage(400, 'Invalid request', 'The request is too long.'));
  return redirect(reply, query === '' ? path : `${path}?${query}`);
}

/** A form's or query's parameters: the body of a form post, or the query of a GET, with repeats visible. */
export function requestParams(request: FastifyRequest): URLSearchParams {
  if (request.method === 'POST') return request.body instanceof URLSearchParams ? request.body : new URLSearchParams();
  const query = request.url.indexOf('?');
  return parseParams(query < 0 ? '' : request.url.slice(query + 1), 'query');
}

/**
 * Form-encoded parameters (RFC 6749 Appendix B), a form body's or a query's: every form and query parameter
 * the authorization server reads comes through here. URLSearchParams turns percent-encoded bytes that are not
 * UTF-8 into replacement characters, and hands on a NUL, which PostgreSQL text refuses: the request would go
 * on with a parameter other than the one sent, or fail as the server's fault. Either is refused as malformed
 * (`invalid_request`; the pages answer it with the 400 error page, never a redirect).
 */
export function parseParams(text: string, source: 'form' | 'query'): URLSearchParams {
  const params = new URLSearchParams(text);
  for (const [name, value] of params) {
    if (name.includes('\uFFFD') || value.includes('\uFFFD')) throw new OAuthError('invalid_request', `The ${source} is not valid UTF-8 once percent-decoded.`);
    if (containsInvalidText(name) || containsInvalidText(value)) throw new OAuthError('invalid_request', `The ${source} contains a NUL character or an unpaired surrogate.`);
  }
  return params;
}

/** One parameter's value, or undefined when it is absent, empty or repeated. */
export function singleParam(params: URLSearchParams, name: string): string | undefined {
  const values = params.getAll(name);
  return values.length === 1 && values[0] !== '' ? values[0] : undefined;
}
