import type { Kysely, Selectable } from 'kysely';
import type { Db } from './dialect.js';
import type { Database } from './schema.js';
import type { SqliteHandle } from './sqlite-handle.js';

/** The tables whose rows may share a commit with other requests' rows: each row is one request's own insert. */
export type BatchedTable = 'accessTokens' | 'refreshTokens';

export type BatchedRow = { [T in BatchedTable]: { table: T; row: Selectable<Database[T]> } }[BatchedTable];

/** Every column, in the order of the SQLite statement's parameters. */
const COLUMNS = {
  accessTokens: [
    'jti', 'tokenHash', 'format', 'clientId', 'clientRegistrationId', 'subject', 'subjectType', 'scopes', 'grantType', 'issuedAt', 'expiresAt',
    'revokedAt', 'grantId',
  ],
  refreshTokens: ['tokenHash', 'familyId', 'clientId', 'clientRegistrationId', 'userId', 'scopes', 'authTime', 'issuedAt', 'expiresAt', 'rotatedAt', 'revokedAt'],
} as const satisfies { [T in BatchedTable]: readonly (keyof Database[T] & string)[] };

// A column added to one of the tables and not to the lists above fails the build here.
type Unlisted<T extends BatchedTable> = Exclude<keyof Database[T], (typeof COLUMNS)[T][number]>;
const everyColumnListed: [Unlisted<'accessTokens'>, Unlisted<'refreshTokens'>] extends [never, never] ? true : never = true;
void everyColumnListed;

const snakeCase = (name: string) => name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
const INSERT_SQL: Readonly<Record<BatchedTable, string>> = {
  accessTokens: insertSql('accessTokens'),
  refreshTokens: insertSql('refreshTokens'),
};

function insertSql(table: BatchedTable): string {
  const columns = COLUMNS[table];
  return `insert into ${snakeCase(table)} (${columns.map(snakeCase).join(', ')}) values (${columns.map(() => '?').join(', ')})`;
}

/** Rows per multi-row INSERT on PostgreSQL: 13 columns x 1000 rows stays far below its 65,535 parameters. */
const POSTGRES_CHUNK = 1000;

/**
 * Why a request's rows are not stored: the commit they shared failed. Every request of that commit gets
 * it, no other; `code` makes it a 503 (errors/rest-renderer.ts isUnavailable), the cause goes to the log.
 */
export class BatchCommitError extends Error {
  readonly code = 'PORTCULLIS_BATCH_COMMIT_FAILED';

  constructor(cause: unknown) {
    super('The rows could not be committed', { cause });
    this.name = 'BatchCommitError';
  }
}

/**
 * The client registration a request's rows were issued under, as the request saw it (its `updatedAt`). The
 * commit stores the rows only if the registration is unchanged, reading it in the commit's own transaction
 * (on PostgreSQL with FOR SHARE): a change that revokes the client's tokens (a secret rotated after a leak)
 * locks the registration first, so either it commits first and the rows are refused, or it waits for this
 * commit and revokes them with the rest. Nothing minted under an old secret outlives the rotation.
 */
export interface RegistrationGuard {
  clientRegistrationId: string;
  updatedAt: string;
}

/** Why a request's rows were not stored: its client registration changed (or went) before they could be. */
export class StaleRegistrationError extends Error {
  readonly code = 'PORTCULLIS_STALE_REGISTRATION';

  constructor() {
    super('The client registration changed before the rows were committed');
    this.name = 'StaleRegistrationError';
  }
}

interface Waiter {
  rows: readonly BatchedRow[];
  guard: RegistrationGuard | null;
  resolve(): void;
  reject(error: BatchCommitError | StaleRegistrationError): void;
}

/**
 * Commits the rows that requests hand in during one event-loop turn in one transaction, and settles each
 * request's promise once that commit is done: a token is answered only after its row is durable, and a
 * commit costs once per turn what it used to cost per token (the WAL write on SQLite, a round trip and a
 * flush on PostgreSQL). A failed commit fails exactly the requests whose rows were in it.
 *
 * Only inserts of rows that no other request reads before its own request has answered belong here (a
 * token's row is read when the token comes back). Decisions that must be taken against the database —
 * a refresh token's rotation, a code's redemption — stay their own conditional statements.
 *
 * On SQLite the rows go through prepared statements on the connection Kysely owns, inside
 * `kysely.connection()`, so no Kysely transaction is open around them (sqlite-handle.ts): a request never
 * reads another request's uncommitted rows. For the same reason a caller must not wait for `write` while
 * it holds a Kysely transaction or connection itself: the commit would wait for that connection.
 */
export class TurnBatch {
  readonly #db: Db;
  #pending: Waiter[] = [];

  constructor(db: Db) {
    this.#db = db;
  }

  /**
   * Resolves when the rows are committed; rejects with BatchCommitError when their commit failed, and with
   * StaleRegistrationError (nothing stored) when `guard`'s registration changed meanwhile.
   */
  write(rows: readonly BatchedRow[], guard: RegistrationGuard | null = null): Promise<void> {
    return new Promise((resolve, reject) => {
      // The first row of a turn schedules the commit: setImmediate runs after the turn's I/O callbacks.
      if (this.#pending.length === 0) setImmediate(() => this.#commit());
      this.#pending.push({ rows, guard, resolve, reject });
    });
  }

  #commit(): void {
    const waiters = this.#pending;
    this.#pending = [];
    const handle = this.#db.sqlite;
    const committed = handle
      ? this.#db.kysely.connection().execute(async () => commitOnSqlite(handle, waiters))
      : commitOnPostgres(this.#db.kysely, waiters);
    committed.then(
      (stale) => {
        for (const waiter of waiters) {
          if (stale.has(waiter)) waiter.reject(new StaleRegistrationError());
          else waiter.resolve();
        }
      },
      (error: unknown) => {
        const failed = new BatchCommitError(error);
        for (const waiter of waiters) waiter.reject(failed);
      },
    );
  }
}

/** The waiters whose guard no longer matches the registration as `current` reads it (id -> updatedAt). */
function staleWaiters(waiters: readonly Waiter[], current: ReadonlyMap<string, string>): Set<Waiter> {
  return new Set(waiters.filter(({ guard }) => guard !== null && current.get(guard.clientRegistrationId) !== guard.updatedAt));
}

function guardedIds(waiters: readonly Waiter[]): string[] {
  return [...new Set(waiters.flatMap(({ guard }) => (guard === null ? [] : [guard.clientRegistrationId])))];
}

function commitOnSqlite(handle: SqliteHandle, waiters: readonly Waiter[]): Set<Waiter> {
  const statements = { accessTokens: handle.prepare(INSERT_SQL.accessTokens), refreshTokens: handle.prepare(INSERT_SQL.refreshTokens) };
  const registration = handle.prepare('select updated_at from clients where id = ?');
  // The single writer: a registration read here cannot change before this transaction commits.
  return handle.immediateTransaction(() => {
    const current = new Map<string, string>();
    for (const id of guardedIds(waiters)) {
      const row = registration.get([id]) as { updated_at: string } | undefined;
      if (row) current.set(id, row.updated_at);
    }
    const stale = staleWaiters(waiters, current);
    for (const waiter of waiters) {
      if (stale.has(waiter)) continue;
      for (const { table, row } of waiter.rows) {
        const values = row as unknown as Record<string, unknown>;
        statements[table].run(COLUMNS[table].map((column) => values[column]));
      }
    }
    return stale;
  });
}

async function commitOnPostgres(kysely: Kysely<Database>, waiters: readonly Waiter[]): Promise<Set<Waiter>> {
  return kysely.transaction().execute(async (trx) => {
    const ids = guardedIds(waiters);
    // FOR SHARE: a revocation that locks the registration (revokeClientTokens) waits for this commit, or
    // this read waits for it and sees the registration as it left it.
    const registrations = ids.length === 0 ? [] : await trx.selectFrom('clients').select(['id', 'updatedAt']).where('id', 'in', ids).forShare().execute();
    const stale = staleWaiters(waiters, new Map(registrations.map((row) => [row.id, row.updatedAt])));
    const byTable: { [T in BatchedTable]: Selectable<Database[T]>[] } = { accessTokens: [], refreshTokens: [] };
    for (const waiter of waiters) {
      if (stale.has(waiter)) continue;
      for (const entry of waiter.rows) {
        if (entry.table === 'accessTokens') byTable.accessTokens.push(entry.row);
        else byTable.refreshTokens.push(entry.row);
      }
    }
    for (const table of ['accessTokens', 'refreshTokens'] as const) {
      const tableRows = byTable[table];
      for (let start = 0; start < tableRows.length; start += POSTGRES_CHUNK) {
        await trx.insertInto(table).values(tableRows.slice(start, start + POSTGRES_CHUNK)).execute();
      }
    }
    return stale;
  });
}
