import type { Kysely, Migration } from 'kysely';

/**
 * `audit_events.trace_id`: the W3C trace id of the request a decision was made in, when its caller sent a
 * `traceparent` (covered by the chain hash when present, as `scopes` is).
 */
export const auditTraceId: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('audit_events').addColumn('trace_id', 'text').execute();
  },
};
