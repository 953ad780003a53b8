/** Who is calling. Users and clients both act under a token's scopes and a role. */
export type Principal = AnonymousPrincipal | TokenPrincipal;

export interface AnonymousPrincipal {
  kind: 'anonymous';
}

export interface TokenPrincipal {
  kind: 'user' | 'client';
  /** The user id for users, the OAuth client_id for clients; what `owner` conditions compare with. */
  subject: string;
  role: string;
  /** The OAuth client the token was issued to. */
  clientId: string;
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
