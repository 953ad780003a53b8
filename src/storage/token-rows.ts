import type { Selectable } from 'kysely';
import type { Database } from './schema.js';

/**
 * The tables whose rows a token grant inserts, each row one request's own: they may share a commit with
 * other requests' rows (turn-batch.ts) and are inserted with every column bound (grant-store.ts).
 */
export type TokenTable = 'accessTokens' | 'refreshTokens';

export type TokenRow = { [T in TokenTable]: { table: T; row: Selectable<Database[T]> } }[TokenTable];

/** Every column, in the order an insert binds them. */
export const TOKEN_COLUMNS = {
  accessTokens: [
    'jti', 'tokenHash', 'format', 'clientId', 'clientRegistrationId', 'subject', 'subjectType', 'scopes', 'grantType', 'issuedAt', 'expiresAt',
    'revokedAt', 'grantId',
  ],
  refreshTokens: ['tokenHash', 'familyId', 'clientId', 'clientRegistrationId', 'userId', 'scopes', 'authTime', 'issuedAt', 'expiresAt', 'rotatedAt', 'revokedAt'],
} as const satisfies { [T in TokenTable]: readonly (keyof Database[T] & string)[] };

// A column added to one of the tables and not to the lists above fails the build here.
type Unlisted<T extends TokenTable> = Exclude<keyof Database[T], (typeof TOKEN_COLUMNS)[T][number]>;
const everyColumnListed: [Unlisted<'accessTokens'>, Unlisted<'refreshTokens'>] extends [never, never] ? true : never = true;
void everyColumnListed;

/** A row's values in the order of its table's TOKEN_COLUMNS. */
export function tokenRowValues({ table, row }: TokenRow): unknown[] {
  const values = row as unknown as Record<string, unknown>;
  return TOKEN_COLUMNS[table].map((column) => values[column]);
}
