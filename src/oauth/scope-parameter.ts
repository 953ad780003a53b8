import { OAuthError } from './oauth-error.js';

/** RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), tokens separated by single spaces. */
const SCOPE = /^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/;

/**
 * A user grant names its scopes (the authorization and device authorization endpoints): no default set
 * stands in for a missing parameter (RFC 6749 §3.3 lets the server choose; this one asks the client to).
 */
export const SCOPE_REQUIRED = 'scope is required: request the scopes the application needs.';

/** The scope parameter as a set of distinct scopes, in the order given; refuses what RFC 6749 §3.3 does not allow. */
export function parseScope(value: string): string[] {
  if (value.length > 2048 || !SCOPE.test(value)) throw new OAuthError('invalid_scope', 'The scope parameter is malformed.');
  return [...new Set(value.split(' '))];
}

/**
 * The description of an invalid_scope sent back through the browser (RFC 6749 §4.1.2.1). It never names the
 * refused scopes: they are the request's own text, which anyone can craft, and the application may show the
 * description to its user (`scope=openid Your-session-expired.Sign-in-again-at:https://evil.example`).
 */
export const REFUSED_SCOPE_REDIRECT = 'The application asked for access it is not registered for.';

/** The requested scopes outside `allowed`. */
export function refusedScopes(requested: readonly string[], allowed: readonly string[]): string[] {
  return requested.filter((scope) => !allowed.includes(scope));
}

/**
 * Refuses every requested scope outside `allowed`, naming them: for answers only the authenticated client
 * reads (token and device endpoints). Redirects use REFUSED_SCOPE_REDIRECT.
 */
export function checkScopesAllowed(requested: readonly string[], allowed: readonly string[], who = 'The client'): void {
  const refused = refusedScopes(requested, allowed);
  if (refused.length > 0) throw new OAuthError('invalid_scope', `${who} may not request: ${refused.join(' ')}.`);
}
