/**
 * OpenID Connect scopes describe or outlive a signed-in user (OIDC Core §5.4, §11). A client acting on its
 * own behalf has no user, so they are never granted to it, even to a client registered with them.
 */
export const USER_SCOPES: ReadonlySet<string> = new Set(['openid', 'profile', 'email', 'offline_access']);

/** The scopes asked for and not granted (left unticked on a consent page), space-separated as stored; null when none. */
export function declined(requested: readonly string[], granted: readonly string[]): string | null {
  const left = [...new Set(requested)].filter((scope) => !granted.includes(scope));
  return left.length === 0 ? null : left.join(' ');
}
