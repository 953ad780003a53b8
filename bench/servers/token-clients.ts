/**
 * The clients both token-endpoint servers register, identically: the same ids, secret, scopes and token
 * lifetime, so that the same request bodies and Basic credentials are sent to either.
 */
export const BENCH_SECRET = 'bench-client-secret-0123456789abcdefghijklmn';

/** Client credentials, JWT access tokens (ES256). */
export const JWT_CLIENT = 'bench-jwt';
/** Client credentials, opaque access tokens. */
export const OPAQUE_CLIENT = 'bench-opaque';
/** Authorization code + PKCE and refresh tokens, JWT access tokens. */
export const REFRESH_CLIENT = 'bench-refresh';

export const SCOPE = 'read:posts write:posts';
export const ACCESS_TOKEN_TTL = 600;
export const REDIRECT_URI = 'https://client.bench.invalid/callback';

/** The user the refresh scenario signs in as. */
export const BENCH_USER = { email: 'bench@example.com', password: 'bench-user-password-0123' };

export function basicAuthorization(clientId: string, secret: string = BENCH_SECRET): string {
  // RFC 6749 §2.3.1: both parts form-urlencoded before they are joined; these ids need no escaping.
  return `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`;
}
