import { DEFAULT_MIGRATION_TABLE, Migrator, sql, type Migration, type MigrationProvider } from 'kysely';
import type { Db } from './dialect.js';
import { initial } from './migrations/001-initial.js';
import { idempotencyKeys } from './migrations/002-idempotency-keys.js';
import { auditChain } from './migrations/003-audit-chain.js';
import { emailCaseInsensitive } from './migrations/004-email-case-insensitive.js';
import { tokenBindingAndInvalidations } from './migrations/005-token-binding-and-invalidations.js';
import { auditAggregatesAndCheckpoints } from './migrations/006-audit-aggregates-checkpoints.js';
import { userSignIn } from './migrations/007-user-sign-in.js';
import { authorizationCodeOutcome } from './migrations/008-authorization-code-outcome.js';
import { userRevocations } from './migrations/009-user-revocations.js';
import { selfContainedTokens } from './migrations/010-self-contained-tokens.js';
import { deprecatedUses } from './migrations/011-deprecated-uses.js';
import { pendingDeviceCodes } from './migrations/012-pending-device-codes.js';
import { auditTraceId } from './migrations/013-audit-trace-id.js';
import { clientRateLimit } from './migrations/014-client-rate-limit.js';
import { signingKeySchedule } from './migrations/015-signing-key-schedule.js';
import { auditKeyRewrap } from './migrations/016-audit-key-rewrap.js';
import { deviceCodeAddress } from './migrations/017-device-code-address.js';
import { declinedScopes } from './migrations/018-declined-scopes.js';

/** The ordered migration set. Names sort in application order; never rename or edit a shipped one. */
function migrationsFor(db: Db): Record<string, Migration> {
  return {
    '001-initial': initial(db.dialect),
    '002-idempotency-keys': idempotencyKeys,
    '003-audit-chain': auditChain(db.dialect),
    '004-email-case-insensitive': emailCaseInsensitive,
    '005-token-binding-and-invalidations': tokenBindingAndInvalidations(db.dialect),
    '006-audit-aggregates-checkpoints': auditAggregatesAndCheckpoints(db.dialect),
    '007-user-sign-in': userSignIn(db.dialect),
    '008-authorization-code-outcome': authorizationCodeOutcome,
    '009-user-revocations': userRevocations,
    '010-self-contained-tokens': selfContainedTokens,
    '011-deprecated-uses': deprecatedUses,
    '012-pending-device-codes': pendingDeviceCodes,
    '013-audit-trace-id': auditTraceId,
    '014-client-rate-limit': clientRateLimit,
    '015-signing-key-schedule': signingKeySchedule,
    '016-audit-key-rewrap': auditKeyRewrap(db.dialect),
    '017-device-code-address': deviceCodeAddress,
    '018-declined-scopes': declinedScopes,
  };
}

/**
 * Applies every migration not applied yet: the set above, and `more` when an API serves tables of its own
 * (a resource type a test adds; their names sort after the set's).
 */
export async function migrateToLatest(db: Db, more: Readonly<Record<string, Migration>> = {}): Promise<string[]> {
  return migrateWith(db, (migrator) => migrator.migrateToLatest(), more);
}

/** Applies migrations up to and including `name` (an upgrade test starts from an older schema). */
export async function migrateTo(db: Db, name: string): Promise<string[]> {
  return migrateWith(db, (migrator) => migrator.migrateTo(name), {});
}

/**
 * The database has applied migrations this code does not have: a newer version of the server migrated it
 * (this one is a rollback), or a contract with resource types this one lacks. Nothing is changed; the
 * server does not start on a schema it does not know.
 */
export class UnknownMigrationsError extends Error {
  constructor(readonly names: readonly string[]) {
    super(
      `The database has applied migrations this version does not know (${names.join(', ')}): a newer version of the server, ` +
        'or a contract with more resource types, migrated it. Run that version, or restore a backup taken before it migrated.',
    );
    this.name = 'UnknownMigrationsError';
  }
}

/** The names of the migrations the database has applied (none on a new database). */
async function appliedMigrations(db: Db): Promise<string[]> {
  const tables = await db.kysely.introspection.getTables({ withInternalKyselyTables: true });
  if (!tables.some((table) => table.name === DEFAULT_MIGRATION_TABLE)) return [];
  const { rows } = await sql<{ name: string }>`select name from ${sql.table(DEFAULT_MIGRATION_TABLE)}`.execute(db.kysely);
  return rows.map((row) => row.name);
}

async function migrateWith(
  db: Db,
  run: (migrator: Migrator) => ReturnType<Migrator['migrateToLatest']>,
  more: Readonly<Record<string, Migration>>,
): Promise<string[]> {
  const migrations = { ...migrationsFor(db), ...more };
  const unknown = (await appliedMigrations(db)).filter((name) => !Object.hasOwn(migrations, name)).sort();
  if (unknown.length > 0) throw new UnknownMigrationsError(unknown);
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  const migrator = new Migrator({ db: db.kysely, provider });
  const { error, results } = await run(migrator);
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
