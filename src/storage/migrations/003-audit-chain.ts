import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../dialect.js';

/**
 * Audit events become a hash chain and append-only: a trigger refuses UPDATE and DELETE (and TRUNCATE on
 * PostgreSQL), so only someone who can change the schema can alter history, and `audit verify` shows it.
 */
export const auditChain = (dialect: DialectName): Migration => ({
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('audit_events').addColumn('prev_hash', 'text').execute();
    await db.schema.alterTable('audit_events').addColumn('hash', 'text').execute();
    if (dialect === 'postgres') {
      await sql`
        create function audit_events_append_only() returns trigger language plpgsql as $$
        begin
          raise exception 'audit_events is append-only' using errcode = 'insufficient_privilege';
        end
        $$`.execute(db);
      await sql`
        create trigger audit_events_append_only before update or delete on audit_events
        for each row execute function audit_events_append_only()`.execute(db);
      await sql`
        create trigger audit_events_no_truncate before truncate on audit_events
        for each statement execute function audit_events_append_only()`.execute(db);
    } else {
      await sql`
        create trigger audit_events_no_update before update on audit_events
        begin select raise(abort, 'audit_events is append-only'); end`.execute(db);
      await sql`
        create trigger audit_events_no_delete before delete on audit_events
        begin select raise(abort, 'audit_events is append-only'); end`.execute(db);
    }
  },
});
