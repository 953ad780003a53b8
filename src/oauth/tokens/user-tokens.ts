import type { Kysely } from 'kysely';
import type { ClientRecord } from '../../storage/clients.js';
import type { RefreshTokenRow } from '../../storage/refresh-tokens.js';
import type { TokenRow } from '../../storage/token-rows.js';
import type { Database } from '../../storage/schema.js';
import type { KeyStore } from '../keys/key-store.js';
import { generateLookupToken, tokenLookupKey } from '../secrets.js';
import { signIdToken } from './id-token.js';
import type { AccessTokenRow } from './access-token-records.js';
import type { IssuedAccessToken, TokenService } from './token-service.js';

export const REFRESH_TOKEN = 'refresh_token';

export interface UserGrant {
  client: ClientRecord;
  userId: string;
  scopes: string[];
  /** The grant the tokens belong to; also the refresh family's id. */
  grantId: string;
  grantType: string;
  /** Epoch seconds of the user's sign-in. */
  authTime: number;
  nonce: string | null;
  /** The refresh token's scopes when it differs from the access token's (a narrowed refresh keeps the family's). */
  refreshScopes?: string[];
  /** Scopes the client asked for that the user did not grant (the consent page's unticked boxes). */
  declinedScopes?: readonly string[];
}

export interface UserTokens {
  access: IssuedAccessToken;
  refreshToken: string | null;
  idToken: string | null;
}

export interface UserTokenDeps {
  db: Kysely<Database>;
  tokens: TokenService;
  keys: KeyStore;
  issuer: string;
  refreshTokenTtl: number;
  /** Seconds from the sign-in (`authTime`) after which a family's refresh tokens end, however often rotated. */
  refreshTokenMaxLifetime: number;
  clock?: () => number;
}

/**
 * Whether a grant yields a refresh token: the client is registered for the refresh_token grant, it is not
 * a browser-based public client (seed: in single-page apps the refresh token never reaches the browser;
 * such apps renew with prompt=none), the user did not untick `offline_access` when the client asked for
 * it (the consent page says it keeps access while the user is away), and under OpenID Connect the user
 * allowed `offline_access` (Core §11). A plain OAuth grant whose user never declined it has one (RFC 6749 §1.5).
 */
export function mayIssueRefreshToken(client: ClientRecord, scopes: readonly string[], declinedScopes: readonly string[] = []): boolean {
  if (!client.grantTypes.includes(REFRESH_TOKEN)) return false;
  if (isBrowserBasedClient(client)) return false;
  if (declinedScopes.includes('offline_access')) return false;
  return !scopes.includes('openid') || scopes.includes('offline_access');
}

/** A public client that redirects to an https page is a single-page app (native apps use loopback or private-use URIs). */
export function isBrowserBasedClient(client: { type: string; redirectUris: readonly string[] }): boolean {
  return client.type === 'public' && client.redirectUris.some((uri) => uri.startsWith('https:'));
}

/** The rows that make a grant's tokens valid; stored by `insertUserTokenRows` in the grant's transaction. */
export interface UserTokenRows {
  access: AccessTokenRow;
  refresh: RefreshTokenRow | null;
}

/**
 * The access token, the refresh token when the client may have one, and the ID token when `openid` was
 * granted, signed but not yet valid: their rows are stored by the transaction that checks the grant.
 */
export async function signUserTokens(deps: UserTokenDeps, grant: UserGrant): Promise<{ tokens: UserTokens; rows: UserTokenRows }> {
  const { client } = grant;
  const { issued: access, row: accessRow } = await deps.tokens.signAccessToken({
    client,
    subject: grant.userId,
    subjectType: 'user',
    scopes: grant.scopes,
    grantType: grant.grantType,
    grantId: grant.grantId,
  });
  const now = Math.floor((deps.clock ?? Date.now)() / 1000);
  const refreshScopes = grant.refreshScopes ?? grant.scopes;
  let refreshToken: string | null = null;
  let refreshRow: RefreshTokenRow | null = null;
  // Each rotation extends a family by the refresh token's lifetime, but never past the end of its sign-in's
  // maximum lifetime: a family in use would otherwise live for ever, and a stolen one with it.
  const refreshExpiresAt = Math.min(now + deps.refreshTokenTtl, grant.authTime + deps.refreshTokenMaxLifetime);
  if (mayIssueRefreshToken(client, refreshScopes, grant.declinedScopes) && refreshExpiresAt > now) {
    refreshToken = generateLookupToken((deps.clock ?? Date.now)());
    refreshRow = {
      tokenHash: tokenLookupKey(refreshToken),
      familyId: grant.grantId,
      clientId: client.clientId,
      clientRegistrationId: client.id,
      userId: grant.userId,
      scopes: refreshScopes.join(' '),
      authTime: new Date(grant.authTime * 1000).toISOString(),
      issuedAt: new Date(now * 1000).toISOString(),
      expiresAt: new Date(refreshExpiresAt * 1000).toISOString(),
      rotatedAt: null,
      revokedAt: null,
    };
  }
  let idToken: string | null = null;
  if (grant.scopes.includes('openid')) {
    const key = await deps.keys.signingKey(client.idTokenSignedResponseAlg);
    idToken = await signIdToken(
      {
        issuer: deps.issuer,
        clientId: client.clientId,
        subject: grant.userId,
        authTime: grant.authTime,
        nonce: grant.nonce,
        accessToken: access.accessToken,
        issuedAt: now,
        expiresAt: now + access.expiresIn,
      },
      key,
    );
  }
  return { tokens: { access, refreshToken, idToken }, rows: { access: accessRow, refresh: refreshRow } };
}

/** The rows in the shape the grant's store inserts. */
export function tokenRows(rows: UserTokenRows): TokenRow[] {
  const access: TokenRow = { table: 'accessTokens', row: rows.access };
  return rows.refresh === null ? [access] : [access, { table: 'refreshTokens', row: rows.refresh }];
}
