import type { Kysely, Migration } from 'kysely';

/**
 * `device_codes.address_key`: the budget key of the address that asked for the code (limits/address-key.ts:
 * an IPv4 address, or the /64 of an IPv6 one), so that one address can hold only a small share of a
 * client's waiting codes (MAX_PENDING_DEVICE_CODES_PER_ADDRESS), counted through an index by registration,
 * address, status and expiry. Codes issued before this version keep null: they count against their client
 * only, and are gone within the ten minutes a device code lives.
 */
export const deviceCodeAddress: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('device_codes').addColumn('address_key', 'text').execute();
    await db.schema
      .createIndex('device_codes_pending_address_idx')
      .on('device_codes')
      .columns(['client_registration_id', 'address_key', 'status', 'expires_at'])
      .execute();
  },
};
