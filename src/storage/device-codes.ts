import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, DeviceCodesTable } from './schema.js';
import { isSqlite } from './write-transaction.js';

export type DeviceCodeRow = Selectable<DeviceCodesTable>;

export async function insertDeviceCode(db: Kysely<Database>, row: DeviceCodeRow): Promise<void> {
  await db.insertInto('deviceCodes').values(row).execute();
}

/** How many device codes wait for their user, and when the first of them to expire does (null: none wait). */
export interface PendingDeviceCodes {
  count: number;
  firstExpiry: string | null;
}

/**
 * The registration's device codes that still wait for their user (pending, not expired): all of them, or
 * with `addressKey` those that address asked for.
 */
export async function pendingDeviceCodes(db: Kysely<Database>, clientRegistrationId: string, now: string, addressKey?: string): Promise<PendingDeviceCodes> {
  let query = db
    .selectFrom('deviceCodes')
    .select((eb) => [eb.fn.countAll<string | number>().as('pending'), eb.fn.min('expiresAt').as('firstExpiry')])
    .where('clientRegistrationId', '=', clientRegistrationId)
    .where('status', '=', 'pending')
    .where('expiresAt', '>', now);
  if (addressKey !== undefined) query = query.where('addressKey', '=', addressKey);
  const row = await query.executeTakeFirstOrThrow();
  return { count: Number(row.pending), firstExpiry: row.firstExpiry ?? null };
}

/** The first keys of the advisory locks (the second is a hash): "deva" for one address's codes, "devc" for the registration's. */
const ADDRESS_DEVICE_CODES_LOCK = 0x64657661;
const PENDING_DEVICE_CODES_LOCK = 0x64657663;

/**
 * Orders the transactions that count one address's waiting device codes of a registration and then add
 * one, so that two of them cannot both count the same codes and both add theirs. On PostgreSQL an advisory
 * lock held to the end of the transaction, keyed by the registration and the address (two pairs whose keys
 * hash alike merely wait for each other); each later statement of the transaction sees what the previous
 * holder committed. On SQLite the write transaction already excludes every other writer
 * (write-transaction.ts), so there is nothing to take.
 */
export async function lockAddressDeviceCodes(db: Kysely<Database>, clientRegistrationId: string, addressKey: string): Promise<void> {
  if (!isSqlite(db)) await sql`select pg_advisory_xact_lock(${ADDRESS_DEVICE_CODES_LOCK}, hashtext(${`${clientRegistrationId} ${addressKey}`}))`.execute(db);
}

/**
 * The same for all of a registration's waiting codes, whichever address asked: `shared` by requests far from
 * the client's bound, which need not wait for each other, `exclusive` near it, which waits for them all.
 * Taken after the address's lock, never before it, so that two transactions cannot each hold the lock the
 * other waits for. A row lock on the registration would also wait for its grants in progress, which hold it
 * shared (grant-store.ts).
 *
 * Answers how many transactions of the database can be in flight at once: PostgreSQL's `max_connections`,
 * read in the same statement (so a server restarted with another setting is read anew); 1 on SQLite, whose
 * writers take turns.
 */
export async function lockPendingDeviceCodes(db: Kysely<Database>, clientRegistrationId: string, mode: 'shared' | 'exclusive'): Promise<number> {
  if (isSqlite(db)) return 1;
  const lock =
    mode === 'shared'
      ? sql<{ connections: number }>`select pg_advisory_xact_lock_shared(${PENDING_DEVICE_CODES_LOCK}, hashtext(${clientRegistrationId})), current_setting('max_connections')::int as connections`
      : sql<{ connections: number }>`select pg_advisory_xact_lock(${PENDING_DEVICE_CODES_LOCK}, hashtext(${clientRegistrationId})), current_setting('max_connections')::int as connections`;
  return Number((await lock.execute(db)).rows[0]!.connections);
}

export async function findDeviceCode(db: Kysely<Database>, deviceCodeHash: string): Promise<DeviceCodeRow | null> {
  return (await db.selectFrom('deviceCodes').selectAll().where('deviceCodeHash', '=', deviceCodeHash).executeTakeFirst()) ?? null;
}

export async function findDeviceCodeByUserCode(db: Kysely<Database>, userCode: string): Promise<DeviceCodeRow | null> {
  return (await db.selectFrom('deviceCodes').selectAll().where('userCode', '=', userCode).executeTakeFirst()) ?? null;
}

/** Records the user's answer if the request is still pending; false when it was answered already. */
export async function decideDeviceCode(
  db: Kysely<Database>,
  deviceCodeHash: string,
  decision: { status: 'approved' | 'denied'; userId: string; authTime: string; scopes: string; declinedScopes: string | null },
): Promise<boolean> {
  const result = await db
    .updateTable('deviceCodes')
    .set(decision)
    .where('deviceCodeHash', '=', deviceCodeHash)
    .where('status', '=', 'pending')
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Records a poll and, when polling too fast, the longer interval (RFC 8628 §3.5 slow_down). */
export async function recordDevicePoll(db: Kysely<Database>, deviceCodeHash: string, polledAt: string, intervalSeconds: number): Promise<void> {
  await db.updateTable('deviceCodes').set({ lastPolledAt: polledAt, intervalSeconds }).where('deviceCodeHash', '=', deviceCodeHash).execute();
}

