/** Who is calling. Users and clients both act under a token's scopes and a role. */
export type Principal = AnonymousPrincipal | TokenPrincipal;

export interface AnonymousPrincipal {
  kind: 'anonymous';
}

export interface TokenPrincipal {
  kind: 'user' | 'client';
  /** The token's `sub`: the user id for users, the OAuth client_id for clients. */
  subject: string;
  /**
   * The caller's resource id: the user's id, or the client's registration id. `owner` conditions compare
   * with it and `authorId` records it. Users and clients get ids from the same generator, so a client can
   * never pass for a user (a client_id is chosen by an admin and could collide with a user id).
   */
  id: string;
  role: string;
  /** The OAuth client the token was issued to. */
  clientId: string;
  /**
   * That client's registration (`clients.id`): a client_id deleted and registered again is another
   * registration, so what is keyed by the caller (stored idempotent responses) is keyed by this.
   */
  clientRegistrationId: string;
  /** The client's own request budget per rate-limit window (its registration's `rateLimit`); null: the server's. */
  clientRateLimit: number | null;
  scopes: ReadonlySet<string>;
  token: {
    jti: string;
    format: 'jwt' | 'opaque';
    grantType: string;
    issuedAt: number;
    expiresAt: number;
  };
}

export const ANONYMOUS: AnonymousPrincipal = Object.freeze({ kind: 'anonymous' });
