/**
 * Query parameters that carry credentials. The server refuses every one of them in a URL (tokens go in the
 * Authorization header, secrets in the body), but the request line is logged before that refusal, and a
 * log is read by more people than the database.
 */
const CREDENTIAL_PARAMETERS = new Set([
  'access_token', 'refresh_token', 'id_token', 'token', 'code', 'code_verifier', 'client_secret', 'password',
  'assertion', 'client_assertion', 'device_code', 'user_code', 'api_key', 'apikey', 'key', 'secret',
]);

export const REDACTED = '[REDACTED]';

/** The URL with the value of every credential-like query parameter replaced (names compared case-insensitively). */
export function redactUrl(url: string): string {
  const query = url.indexOf('?');
  if (query === -1) return url;
  const pairs = url.slice(query + 1).split('&').map((pair) => {
    const eq = pair.indexOf('=');
    const rawName = eq === -1 ? pair : pair.slice(0, eq);
    let name: string;
    try {
      name = decodeURIComponent(rawName.replace(/\+/g, ' '));
    } catch {
      name = rawName;
    }
    return CREDENTIAL_PARAMETERS.has(name.toLowerCase()) ? `${rawName}=${REDACTED}` : pair;
  });
  return `${url.slice(0, query)}?${pairs.join('&')}`;
}
