/**
 * Error codes of the OAuth endpoints, as the RFCs spell them: RFC 6749 §5.2 (token endpoint) and
 * §4.1.2.1 (authorization endpoint), RFC 8628 §3.5 (device flow), RFC 7009 §2.2.1 (revocation), RFC 6750
 * §3.1 (userinfo, a protected resource).
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope'
  | 'access_denied'
  | 'unsupported_response_type'
  | 'server_error'
  | 'temporarily_unavailable'
  | 'authorization_pending'
  | 'slow_down'
  | 'expired_token'
  | 'unsupported_token_type'
  | 'invalid_token'
  | 'insufficient_scope';

/** An OAuth error that is safe to send as it is: code, description, status and headers are the response. */
export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status: number = 400,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(description);
    this.name = 'OAuthError';
  }
}
