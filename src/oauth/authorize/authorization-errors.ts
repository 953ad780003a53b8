import type { OAuthErrorCode } from '../oauth-error.js';

/**
 * The request cannot be trusted to say where to send the user back (unknown client, a redirect_uri that is
 * not registered): RFC 6749 §4.1.2.1 forbids redirecting, so the user sees an error page.
 */
export class AuthorizationPageError extends Error {
  constructor(
    readonly title: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
    this.name = 'AuthorizationPageError';
  }
}

/** Any other refusal goes back to the client's verified redirect_uri with `error`, `state` and `iss` (RFC 9207). */
export class AuthorizationRedirectError extends Error {
  constructor(
    readonly redirectUri: string,
    readonly error: OAuthErrorCode | 'login_required' | 'consent_required' | 'interaction_required' | 'request_not_supported' | 'request_uri_not_supported',
    readonly description: string,
    readonly state: string | undefined,
  ) {
    super(description);
    this.name = 'AuthorizationRedirectError';
  }
}
