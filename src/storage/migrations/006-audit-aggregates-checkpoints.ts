import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../dialect.js';

/**
 * The audit log stays complete and bounded, and its integrity no longer rests on the database alone:
 * - aggregated events: repeated authentication failures from one address become one event per window
 *   (`count`, `source_address`, `first_seen`, `last_seen`), so an anonymous flood cannot grow the table;
 * - `audit_keys`: the audit signing key, apart from the token keys (`keys rotate` never prunes it);
 * - `audit_checkpoints`: signed (head seq, head hash, event count, time) records, numbered without gaps;
 * - `audit_archives`: where the chain now starts after old events were exported and removed;
 * - the append-only triggers now let a DELETE through only for events an archive record covers
 *   (`audit archive` writes it, signed, in the same transaction), never an UPDATE; checkpoints, archives
 *   and audit keys are append-only themselves. A database role that can insert a forged archive record
 *   can delete, but not unseen: `audit verify` checks every archive record's signature;
 * - idempotency records written before this version are dropped: they may hold a client secret kept for
 *   a replay, and their request fingerprints were unkeyed SHA-256 over bodies that may hold a password
 *   (they are a 24-hour cache; a retry of such a request within the day runs again).
 */
export const auditAggregatesAndCheckpoints = (dialect: DialectName): Migration => ({
  async up(db: Kysely<unknown>) {
    await sql`delete from idempotency_keys`.execute(db);
    const bigint = dialect === 'postgres' ? 'bigint' : 'integer';
    await db.schema.alterTable('audit_events').addColumn('count', 'integer').execute();
    await db.schema.alterTable('audit_events').addColumn('source_address', 'text').execute();
    await db.schema.alterTable('audit_events').addColumn('first_seen', 'text').execute();
    await db.schema.alterTable('audit_events').addColumn('last_seen', 'text').execute();

    await db.schema
      .createTable('audit_keys')
      .addColumn('kid', 'text', (c) => c.primaryKey())
      .addColumn('public_jwk', 'text', (c) => c.notNull())
      .addColumn('private_jwk_encrypted', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('audit_checkpoints')
      .addColumn('number', bigint, (c) => c.primaryKey())
      .addColumn('head_seq', bigint, (c) => c.notNull())
      .addColumn('head_hash', 'text', (c) => c.notNull())
      .addColumn('event_count', bigint, (c) => c.notNull())
      .addColumn('time', 'text', (c) => c.notNull())
      .addColumn('key_fingerprint', 'text', (c) => c.notNull())
      .addColumn('jws', 'text', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('audit_archives')
      .addColumn('up_to_seq', bigint, (c) => c.primaryKey())
      .addColumn('last_hash', 'text', (c) => c.notNull())
      .addColumn('event_count', bigint, (c) => c.notNull())
      .addColumn('checkpoint_number', bigint, (c) => c.notNull())
      .addColumn('archived_at', 'text', (c) => c.notNull())
      .addColumn('key_fingerprint', 'text', (c) => c.notNull())
      .addColumn('jws', 'text', (c) => c.notNull())
      .execute();

    if (dialect === 'postgres') {
      await sql`drop trigger audit_events_append_only on audit_events`.execute(db);
      await sql`
        create function audit_events_archive_only() returns trigger language plpgsql as $$
        begin
          if old.seq <= coalesce((select max(up_to_seq) from audit_archives), 0) then
            return old;
          end if;
          raise exception 'audit_events: only archived events may be deleted (audit archive)'
            using errcode = 'insufficient_privilege';
        end
        $$`.execute(db);
      await sql`
        create trigger audit_events_no_update before update on audit_events
        for each row execute function audit_events_append_only()`.execute(db);
      await sql`
        create trigger audit_events_archive_only before delete on audit_events
        for each row execute function audit_events_archive_only()`.execute(db);
      for (const table of ['audit_keys', 'audit_checkpoints', 'audit_archives']) {
        await sql`
          create trigger ${sql.raw(`${table}_append_only`)} before update or delete on ${sql.table(table)}
          for each row execute function audit_events_append_only()`.execute(db);
        await sql`
          create trigger ${sql.raw(`${table}_no_truncate`)} before truncate on ${sql.table(table)}
          for each statement execute function audit_events_append_only()`.execute(db);
      }
    } else {
      await sql`drop trigger audit_events_no_delete`.execute(db);
      await sql`
        create trigger audit_events_archive_only before delete on audit_events
        when old.seq > coalesce((select max(up_to_seq) from audit_archives), 0)
        begin select raise(abort, 'audit_events: only archived events may be deleted (audit archive)'); end`.execute(db);
      // INSERT OR REPLACE deletes the row it clashes with without firing a delete trigger (recursive_triggers
      // is off per connection): an insert that would replace a row is refused instead.
      const keys: Record<string, string> = { audit_events: 'seq = new.seq or id = new.id', audit_keys: 'kid = new.kid', audit_checkpoints: 'number = new.number', audit_archives: 'up_to_seq = new.up_to_seq' };
      for (const [table, clash] of Object.entries(keys)) {
        await sql`
          create trigger ${sql.raw(`${table}_no_replace`)} before insert on ${sql.table(table)}
          when exists (select 1 from ${sql.table(table)} where ${sql.raw(clash)})
          begin select raise(abort, ${sql.lit(`${table} is append-only: a row may not be replaced`)}); end`.execute(db);
      }
      for (const table of ['audit_keys', 'audit_checkpoints', 'audit_archives']) {
        await sql`
          create trigger ${sql.raw(`${table}_no_update`)} before update on ${sql.table(table)}
          begin select raise(abort, ${sql.lit(`${table} is append-only`)}); end`.execute(db);
        await sql`
          create trigger ${sql.raw(`${table}_no_delete`)} before delete on ${sql.table(table)}
          begin select raise(abort, ${sql.lit(`${table} is append-only`)}); end`.execute(db);
      }
    }
  },
});
