import { OAuthError } from '../oauth-error.js';

/**
 * The authorization server's JSON endpoints. Their clients read errors in RFC 6749's shape (§5.2), so a
 * request with a method the endpoint does not have is answered in it too, not in the REST API's shape.
 */
const JSON_ENDPOINTS: ReadonlySet<string> = new Set(['/oauth/token', '/oauth/revoke', '/oauth/introspect', '/oauth/device_authorization', '/oauth/userinfo']);

/**
 * 405 with `Allow` (RFC 9110 §15.5.6) for a JSON OAuth endpoint asked with another method, e.g. `GET
 * /oauth/token` answered `{"error":"invalid_request","error_description":"Use POST."}`; null for any other path.
 */
export function oauthMethodNotAllowed(path: string, allow: readonly string[]): OAuthError | null {
  if (allow.length === 0 || !JSON_ENDPOINTS.has(path.replace(/\/$/, ''))) return null;
  const methods = allow.filter((method) => method !== 'HEAD');
  return new OAuthError('invalid_request', `Use ${methods.join(' or ')}.`, 405, { Allow: allow.join(', ') });
}
