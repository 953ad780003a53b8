import { sql, type Kysely } from 'kysely';
import type { AuditDecision } from '../../src/audit/audit-event.js';

/** A logger for AuditLog that drops everything. */
export const SILENT_LOGGER = { info: () => {}, error: () => {} };

/** The i-th sample decision: alternately allowed and denied, each about its own post. */
export function sampleDecision(i: number, overrides: Partial<AuditDecision> = {}): AuditDecision {
  return {
    requestId: `req-${i}`,
    subject: `user-${i % 3}`,
    clientId: 'app',
    interface: 'rest',
    operation: 'getPost',
    resourceType: 'post',
    resourceId: `post-${i}`,
    decision: i % 2 === 0 ? 'allow' : 'deny',
    reason: i % 2 === 0 ? 'resource' : 'scope',
    ...overrides,
  };
}

/** What only someone who can change the schema can do: lift the append-only triggers, to tamper. */
export async function liftAppendOnly(db: Kysely<any>, kind: 'sqlite' | 'postgres'): Promise<void> {
  if (kind === 'postgres') await sql`alter table audit_events disable trigger user`.execute(db);
  else {
    await sql`drop trigger audit_events_no_update`.execute(db);
    await sql`drop trigger audit_events_archive_only`.execute(db);
  }
}

/** A trigger that fails every insert into audit_events, as a database that cannot be written would. */
export async function refuseAuditWrites(db: Kysely<any>, kind: 'sqlite' | 'postgres'): Promise<void> {
  if (kind === 'sqlite') {
    await sql`create trigger audit_events_refused before insert on audit_events begin select raise(abort, 'audit writes refused'); end`.execute(db);
  } else {
    await sql`create function audit_events_refused() returns trigger language plpgsql as $$ begin raise exception 'audit writes refused'; end $$`.execute(db);
    await sql`create trigger audit_events_refused before insert on audit_events for each row execute function audit_events_refused()`.execute(db);
  }
}

export async function allowAuditWrites(db: Kysely<any>, kind: 'sqlite' | 'postgres'): Promise<void> {
  if (kind === 'sqlite') await sql`drop trigger audit_events_refused`.execute(db);
  else {
    await sql`drop trigger audit_events_refused on audit_events`.execute(db);
    await sql`drop function audit_events_refused()`.execute(db);
  }
}
