import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** An application holding something the user granted, as the account page lists it. */
export interface UserApplication {
  clientRegistrationId: string;
  name: string;
  /** Every scope it holds by any of its grants, sorted, space-separated. */
  scopes: string;
  /** When the oldest of those grants was made (ISO-8601). */
  grantedAt: string;
}

interface Held {
  clientRegistrationId: string | null;
  name: string;
  scopes: string;
  grantedAt: string;
}

/**
 * Every application that holds a live grant of the user's: a remembered consent, a refresh token that is
 * neither rotated, revoked nor expired, or a live access token issued on the user's behalf. A grant made
 * without a consent — a first-party client, the password grant — is listed too, so the user can end it.
 * Only registrations that still exist (deleting a client ends its tokens).
 */
export async function listUserApplications(db: Kysely<Database>, userId: string, now: string): Promise<UserApplication[]> {
  const [consents, families, tokens] = await Promise.all([
    db
      .selectFrom('consents')
      .innerJoin('clients', 'clients.id', 'consents.clientRegistrationId')
      .select(['consents.clientRegistrationId', 'clients.name', 'consents.scopes', 'consents.grantedAt'])
      .where('consents.userId', '=', userId)
      .execute(),
    db
      .selectFrom('refreshTokens')
      .innerJoin('clients', 'clients.id', 'refreshTokens.clientRegistrationId')
      .select(['refreshTokens.clientRegistrationId', 'clients.name', 'refreshTokens.scopes', 'refreshTokens.authTime as grantedAt'])
      .where('refreshTokens.userId', '=', userId)
      .where('refreshTokens.revokedAt', 'is', null)
      .where('refreshTokens.rotatedAt', 'is', null)
      .where('refreshTokens.expiresAt', '>', now)
      .execute(),
    db
      .selectFrom('accessTokens')
      .innerJoin('clients', 'clients.id', 'accessTokens.clientRegistrationId')
      .select(['accessTokens.clientRegistrationId', 'clients.name', 'accessTokens.scopes', 'accessTokens.issuedAt as grantedAt'])
      .where('accessTokens.subject', '=', userId)
      .where('accessTokens.subjectType', '=', 'user')
      .where('accessTokens.revokedAt', 'is', null)
      .where('accessTokens.expiresAt', '>', now)
      .execute(),
  ]);
  const byClient = new Map<string, { name: string; scopes: Set<string>; grantedAt: string }>();
  for (const held of [...consents, ...families, ...tokens] as Held[]) {
    if (held.clientRegistrationId === null) continue;
    const entry = byClient.get(held.clientRegistrationId) ?? { name: held.name, scopes: new Set<string>(), grantedAt: held.grantedAt };
    for (const scope of held.scopes.split(' ')) if (scope !== '') entry.scopes.add(scope);
    if (held.grantedAt < entry.grantedAt) entry.grantedAt = held.grantedAt;
    byClient.set(held.clientRegistrationId, entry);
  }
  return [...byClient]
    .map(([clientRegistrationId, { name, scopes, grantedAt }]) => ({ clientRegistrationId, name, scopes: [...scopes].sort().join(' '), grantedAt }))
    .sort((a, b) => a.grantedAt.localeCompare(b.grantedAt) || a.clientRegistrationId.localeCompare(b.clientRegistrationId));
}
