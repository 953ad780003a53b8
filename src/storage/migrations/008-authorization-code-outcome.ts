import type { Kysely, Migration } from 'kysely';

/**
 * `authorization_codes.outcome`: what ended a code, so that a code presented again is answered truthfully —
 * `issued` (tokens were issued for it: a replay revokes them), `refused` (the exchange that presented it
 * failed: nothing was issued), `withdrawn` (the user's grants were ended before it was presented). Codes
 * redeemed before this version keep null and are treated as `issued`, as they were.
 */
export const authorizationCodeOutcome: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('authorization_codes').addColumn('outcome', 'text').execute();
  },
};
