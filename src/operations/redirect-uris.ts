/**
 * Where a registered redirect URI sends the user agent, which decides what its client may do: `web` is an
 * `https:` page (in a public client, a browser-based application), `loopback` and `private-use` belong to
 * a native application (RFC 8252 §7.1, §7.3).
 */
export type RedirectUriKind = 'web' | 'loopback' | 'private-use';

export type RedirectUriCheck = { kind: RedirectUriKind } | { problem: string };

// RFC 3986 §3: scheme ":" [ "//" authority ] path ... The authority is read from the text as registered,
// not from a parsed URL, which would rewrite it (`http://127.1/` becomes `http://127.0.0.1/`) while the
// authorization endpoint compares the text as sent (RFC 9700 §2.1).
const SCHEME_AND_AUTHORITY = /^([A-Za-z][A-Za-z0-9+.-]*):(?:\/\/([^/?#]*))?/;

// RFC 8252 §7.3: loopback redirects use the IP literal, never `localhost` (§8.3); the port may vary.
const LOOPBACK_AUTHORITY = /^(?:127\.0\.0\.1|\[::1\])(?::\d{1,5})?$/;

/** RFC 3986 §2: a URI is printable ASCII; anything else must be percent-encoded. */
const URI_CHARACTERS = /^[\x21-\x7e]+$/;

/**
 * The rules for a redirect URI (RFC 6749 §3.1.2, RFC 8252 §7, §8.3, RFC 9700 §2.1, §4.1.3) and, when it
 * keeps them, its kind. Post-logout redirect URIs (OpenID Connect RP-Initiated Logout 1.0 §3) follow the
 * same rules.
 */
export function classifyRedirectUri(uri: string): RedirectUriCheck {
  const match = SCHEME_AND_AUTHORITY.exec(uri);
  if (!match || !URI_CHARACTERS.test(uri) || !URL.canParse(uri)) return { problem: 'must be an absolute URI' };
  // RFC 6749 §3.1.2: the endpoint URI MUST NOT include a fragment component.
  if (uri.includes('#')) return { problem: 'must not have a fragment' };
  // RFC 9700 §2.1, §4.1.3: redirect URIs are compared as exact strings; a pattern is an open redirect.
  if (uri.includes('*')) return { problem: 'must not contain a wildcard: redirect URIs are matched exactly' };
  const scheme = match[1]!.toLowerCase();
  const authority = match[2];
  if (authority?.includes('@')) return { problem: 'must not contain user information' };
  if (scheme === 'https') {
    return authority !== undefined && authority.replace(/:\d*$/, '') !== '' ? { kind: 'web' } : { problem: 'must name a host' };
  }
  if (scheme === 'http') {
    if (authority !== undefined && LOOPBACK_AUTHORITY.test(authority)) return { kind: 'loopback' };
    return { problem: 'may use http only on the loopback addresses 127.0.0.1 and [::1] (not localhost)' };
  }
  // RFC 8252 §7.1: a private-use scheme is a reverse domain name the application controls, so it has a
  // dot; this also keeps out javascript:, data:, file: and every other scheme a browser acts on.
  if (scheme.includes('.')) return { kind: 'private-use' };
  return { problem: 'must use https, http on a loopback address, or a private-use scheme such as com.example.app' };
}
