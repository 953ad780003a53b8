/**
 * OpenID Connect scopes describe or outlive a signed-in user (OIDC Core §5.4, §11). A client acting on its
 * own behalf has no user, so they are never granted to it, even to a client registered with them.
 */
export const USER_SCOPES: ReadonlySet<string> = new Set(['openid', 'profile', 'email', 'offline_access']);
