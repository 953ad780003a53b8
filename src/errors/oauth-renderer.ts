import { OAuthError } from '../oauth/oauth-error.js';
import { ApiError, UNAVAILABLE_RETRY_AFTER_SECONDS } from './registry.js';
import { isUnavailable } from './rest-renderer.js';

export interface RenderedOAuthError {
  status: number;
  headers: Record<string, string>;
  body: { error: string; error_description: string };
}

/** RFC 6749 §5.1/§5.2: responses that carry credentials or errors about them must not be cached. */
export const NO_STORE_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'Cache-Control': 'no-store', Pragma: 'no-cache' });

/**
 * RFC 6749 §5.2 body `{ error, error_description }`. Anything that is not an OAuthError becomes a generic
 * `server_error` (500), or `temporarily_unavailable` (503) when the database cannot be reached; the cause
 * is for the log, never for the client.
 */
export function renderOAuthError(error: unknown): RenderedOAuthError {
  const oauth = toOAuthError(error);
  return {
    status: oauth.status,
    headers: { ...oauth.headers, ...NO_STORE_HEADERS },
    body: { error: oauth.error, error_description: oauth.description },
  };
}

export function toOAuthError(error: unknown): OAuthError {
  if (error instanceof OAuthError) return error;
  // The server refusing work for itself (a full audit log), in RFC 6749's words.
  if (error instanceof ApiError && error.code === 'UNAVAILABLE') return new OAuthError('temporarily_unavailable', error.message, 503, error.headers);
  if (isUnavailable(error)) {
    return new OAuthError('temporarily_unavailable', 'The service is temporarily unavailable; try again later.', 503, {
      'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS),
    });
  }
  return new OAuthError('server_error', 'An internal error occurred.', 500);
}
