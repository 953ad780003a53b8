import type { ClientRecord } from '../../storage/clients.js';
import type { BatchedRow } from '../../storage/turn-batch.js';
import type { KeyStore } from '../keys/key-store.js';
import { digestSecret, generateSecret } from '../secrets.js';
import { signIdToken } from './id-token.js';
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
}

export interface UserTokens {
  access: IssuedAccessToken;
  refreshToken: string | null;
  idToken: string | null;
}

export interface UserTokenDeps {
  tokens: TokenService;
  keys: KeyStore;
  issuer: string;
  refreshTokenTtl: number;
  clock?: () => number;
}

/**
 * Whether a grant yields a refresh token: the client is registered for the refresh_token grant, it is not
 * a browser-based public client (seed: in single-page apps the refresh token never reaches the browser;
 * such apps renew with prompt=none), and under OpenID Connect the user allowed `offline_access` (Core §11).
 */
export function mayIssueRefreshToken(client: ClientRecord, scopes: readonly string[]): boolean {
  if (!client.grantTypes.includes(REFRESH_TOKEN)) return false;
  if (isBrowserBasedClient(client)) return false;
  return !scopes.includes('openid') || scopes.includes('offline_access');
}

/** A public client that redirects to an https page is a single-page app (native apps use loopback or private-use URIs). */
export function isBrowserBasedClient(client: { type: string; redirectUris: readonly string[] }): boolean {
  return client.type === 'public' && client.redirectUris.some((uri) => uri.startsWith('https:'));
}

/** The access token, the refresh token when the client may have one, and the ID token when `openid` was granted. */
export async function issueUserTokens(deps: UserTokenDeps, grant: UserGrant): Promise<UserTokens> {
  const { client } = grant;
  const now = Math.floor((deps.clock ?? Date.now)() / 1000);
  const refreshScopes = grant.refreshScopes ?? grant.scopes;
  let refreshToken: string | null = null;
  const companions: BatchedRow[] = [];
  if (mayIssueRefreshToken(client, refreshScopes)) {
    refreshToken = generateSecret();
    companions.push({
      table: 'refreshTokens',
      row: {
        tokenHash: digestSecret(refreshToken),
        familyId: grant.grantId,
        clientId: client.clientId,
        clientRegistrationId: client.id,
        userId: grant.userId,
        scopes: refreshScopes.join(' '),
        authTime: new Date(grant.authTime * 1000).toISOString(),
        issuedAt: new Date(now * 1000).toISOString(),
        expiresAt: new Date((now + deps.refreshTokenTtl) * 1000).toISOString(),
        rotatedAt: null,
        revokedAt: null,
      },
    });
  }
  // Both rows are committed together, in the commit this turn's tokens share.
  const access = await deps.tokens.issueAccessToken(
    { client, subject: grant.userId, subjectType: 'user', scopes: grant.scopes, grantType: grant.grantType, grantId: grant.grantId },
    companions,
  );
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
  return { access, refreshToken, idToken };
}
