/**
 * The `grant_type` values this server serves (RFC 6749 §4, RFC 8628 §3.4), in one list that client
 * registration, the token endpoint and discovery (`grant_types_supported`, RFC 8414 §2) all read.
 * The contract's `GrantType` enum is the same list (a test keeps them equal). The implicit grant is not
 * served at all (RFC 9700 §2.1.2); `password` only for a client registered as legacy, and only while the
 * server configuration allows it (RFC 9700 §2.4).
 */
export const SERVED_GRANT_TYPES = Object.freeze([
  'authorization_code',
  'refresh_token',
  'client_credentials',
  'urn:ietf:params:oauth:grant-type:device_code',
  'password',
] as const);

export type ServedGrantType = (typeof SERVED_GRANT_TYPES)[number];

/** The grants whose token response may carry a refresh token (RFC 6749 §4.1.4, §4.3.3; RFC 8628 §3.5). */
export const REFRESH_TOKEN_ISSUING_GRANTS: readonly ServedGrantType[] = Object.freeze([
  'authorization_code',
  'urn:ietf:params:oauth:grant-type:device_code',
  'password',
] as const);
