import type { Kysely, Migration } from 'kysely';

/**
 * The device codes a client registration has waiting, counted before each new one is issued (at most
 * MAX_PENDING_DEVICE_CODES per registration): an index by registration, status and expiry.
 */
export const pendingDeviceCodes: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.createIndex('device_codes_pending_idx').on('device_codes').columns(['client_registration_id', 'status', 'expires_at']).execute();
  },
};
