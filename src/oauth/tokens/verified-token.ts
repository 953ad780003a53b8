import type { TokenFormat } from '../../storage/clients.js';

export type SubjectType = 'user' | 'client';

/** An access token as the server sees it after verification. Times are epoch seconds. */
export interface VerifiedToken {
  jti: string;
  format: TokenFormat;
  clientId: string;
  /** The `clients.id` of the registration the token was issued to; a re-registered client_id is another. */
  clientRegistrationId: string | null;
  subject: string;
  subjectType: SubjectType;
  scopes: string[];
  grantType: string;
  /** The user's grant (code exchange, device approval, refresh family) the token belongs to; null for client credentials. */
  grantId: string | null;
  /**
   * A self-contained token's (a client-credentials JWT, which has no row): its registration's revocation
   * count when it was issued; the token is valid only while the registration still has that count. Null
   * for a token with a row (revoking marks the row).
   */
  clientRevocations: number | null;
  issuedAt: number;
  expiresAt: number;
}
