import type { ClientRecord } from '../../storage/clients.js';
import type { Db } from '../../storage/dialect.js';
import { grantReadStore } from '../../storage/grant-store.js';
import type { RefreshTokenRow } from '../../storage/refresh-tokens.js';
import { OAuthError } from '../oauth-error.js';
import { checkScopesAllowed, parseScope } from '../scope-parameter.js';
import { tokenLookupKey } from '../secrets.js';
import { revokeReplayedGrant } from '../tokens/access-token-records.js';
import { REFRESH_TOKEN } from '../tokens/user-tokens.js';
import type { CheckedGrant } from './grant-commit.js';
import { GrantReuseError } from './grant-reuse-error.js';

/**
 * When a refresh token stops being usable (milliseconds): its own expiry, or REFRESH_TOKEN_MAX_LIFETIME after
 * the sign-in that began its family, whichever comes first (the second also ends a family whose token was
 * issued before the setting was lowered). The grant and introspection both ask this.
 */
export function refreshTokenEnds(row: { expiresAt: string; authTime: string }, maxLifetimeSeconds: number): number {
  return Math.min(Date.parse(row.expiresAt), Date.parse(row.authTime) + maxLifetimeSeconds * 1000);
}

/**
 * RFC 6749 §6 with rotation (RFC 9700 §4.14.2): every use returns a new refresh token and retires the
 * presented one. A retired token presented again means two parties hold the family: the whole family and
 * its access tokens are revoked, the legitimate holder's newest tokens included. Of two concurrent uses
 * exactly one wins (a conditional update in the grant's transaction, grant-commit.ts); the other counts
 * as reuse.
 */
export async function grantRefreshToken(
  db: Db,
  client: ClientRecord,
  params: Readonly<Record<string, string>>,
  now: number,
  /** REFRESH_TOKEN_MAX_LIFETIME: also ends a family whose token was issued before it was lowered. */
  maxLifetimeSeconds: number,
): Promise<CheckedGrant> {
  if (!client.grantTypes.includes(REFRESH_TOKEN)) throw new OAuthError('unauthorized_client', 'The client may not use the refresh_token grant.');
  const presented = params.refresh_token;
  if (presented === undefined) throw new OAuthError('invalid_request', 'refresh_token is required.');
  const tokenHash = tokenLookupKey(presented);
  const row = await grantReadStore(db).findRefreshToken(tokenHash);
  if (!row || row.clientRegistrationId !== client.id) throw new OAuthError('invalid_grant', 'The refresh token is not valid.');
  if (row.revokedAt !== null) throw new OAuthError('invalid_grant', 'The refresh token was revoked.');
  if (refreshTokenEnds(row, maxLifetimeSeconds) <= now) {
    throw new OAuthError('invalid_grant', 'The refresh token has expired.');
  }
  const nowIso = new Date(now).toISOString();
  if (row.rotatedAt !== null) await replayed(db, row, nowIso);
  // The family keeps its scopes; this access token may have fewer (§6: never more), and the client's
  // registration may have lost some since. Checked before rotating: a refused request does not use up the
  // token, or the client's next, correct request would count as a replay and end the family.
  const familyScopes = row.scopes.split(' ').filter((scope) => client.scopes.includes(scope));
  let scopes = familyScopes;
  if (params.scope !== undefined) {
    scopes = parseScope(params.scope);
    checkScopesAllowed(scopes, familyScopes, 'The refresh token');
  }
  return {
    client,
    userId: row.userId,
    scopes,
    refreshScopes: familyScopes,
    grantId: row.familyId,
    grantType: REFRESH_TOKEN,
    authTime: Math.floor(Date.parse(row.authTime) / 1000),
    nonce: null,
    claim: async (store, user) => {
      if (!(await store.rotateRefreshToken(tokenHash, nowIso))) {
        // Revoked since it was read (the user signed out everywhere, say) is no reuse; rotated is.
        const current = await store.refreshTokenState(tokenHash);
        if (current?.revokedAt != null && current.rotatedAt === null) return new OAuthError('invalid_grant', 'The refresh token was revoked.');
        return reuseError(row, await store.revokeGrant(row.familyId, nowIso));
      }
      if (!user || !user.active) return new OAuthError('invalid_grant', 'The user can no longer sign in.');
      return null;
    },
  };
}

async function replayed(db: Db, row: RefreshTokenRow, nowIso: string): Promise<never> {
  throw reuseError(row, await revokeReplayedGrant(db.kysely, row.familyId, row.userId, nowIso));
}

function reuseError(row: RefreshTokenRow, revoked: boolean): GrantReuseError {
  return new GrantReuseError(row.familyId, row.userId, 'The refresh token was already used; its family is revoked.', revoked);
}
