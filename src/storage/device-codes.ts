import type { Kysely, Selectable } from 'kysely';
import type { Database, DeviceCodesTable } from './schema.js';

export type DeviceCodeRow = Selectable<DeviceCodesTable>;

export async function insertDeviceCode(db: Kysely<Database>, row: DeviceCodeRow): Promise<void> {
  await db.insertInto('deviceCodes').values(row).execute();
}

/** How many of the registration's device codes still wait for their user (pending, not expired). */
export async function countPendingDeviceCodes(db: Kysely<Database>, clientRegistrationId: string, now: string): Promise<number> {
  const row = await db
    .selectFrom('deviceCodes')
    .select((eb) => eb.fn.countAll<string | number>().as('pending'))
    .where('clientRegistrationId', '=', clientRegistrationId)
    .where('status', '=', 'pending')
    .where('expiresAt', '>', now)
    .executeTakeFirstOrThrow();
  return Number(row.pending);
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
  decision: { status: 'approved' | 'denied'; userId: string; authTime: string; scopes: string },
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

