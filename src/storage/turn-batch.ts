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

interface Waiter {
  rows: readonly BatchedRow[];
  resolve(): void;
  reject(error: BatchCommitError): void;
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

  /** Resolves when the rows are committed; rejects with BatchCommitError when their commit failed. */
  write(rows: readonly BatchedRow[]): Promise<void> {
    return new Promise((resolve, reject) => {
      // The first row of a turn schedules the commit: setImmediate runs after the turn's I/O callbacks.
      if (this.#pending.length === 0) setImmediate(() => this.#commit());
      this.#pending.push({ rows, resolve, reject });
    });
  }

  #commit(): void {
    const waiters = this.#pending;
    this.#pending = [];
    const rows = waiters.flatMap((waiter) => waiter.rows);
    const handle = this.#db.sqlite;
    const committed = handle
      ? this.#db.kysely.connection().execute(async () => commitOnSqlite(handle, rows))
      : commitOnPostgres(this.#db.kysely, rows);
    committed.then(
      () => {
        for (const waiter of waiters) waiter.resolve();
      },
      (error: unknown) => {
        const failed = new BatchCommitError(error);
        for (const waiter of waiters) waiter.reject(failed);
      },
    );
  }
}

function commitOnSqlite(handle: SqliteHandle, rows: readonly BatchedRow[]): void {
  const statements = { accessTokens: handle.prepare(INSERT_SQL.accessTokens), refreshTokens: handle.prepare(INSERT_SQL.refreshTokens) };
  handle.immediateTransaction(() => {
    for (const { table, row } of rows) {
      const values = row as unknown as Record<string, unknown>;
      statements[table].run(COLUMNS[table].map((column) => values[column]));
    }
  });
}

async function commitOnPostgres(kysely: Kysely<Database>, rows: readonly BatchedRow[]): Promise<void> {
  const byTable: { [T in BatchedTable]: Selectable<Database[T]>[] } = { accessTokens: [], refreshTokens: [] };
  for (const entry of rows) {
    if (entry.table === 'accessTokens') byTable.accessTokens.push(entry.row);
    else byTable.refreshTokens.push(entry.row);
  }
  await kysely.transaction().execute(async (trx) => {
    for (const table of ['accessTokens', 'refreshTokens'] as const) {
      const tableRows = byTable[table];
      for (let start = 0; start < tableRows.length; start += POSTGRES_CHUNK) {
        await trx.insertInto(table).values(tableRows.slice(start, start + POSTGRES_CHUNK)).execute();
      }
    }
  });
}
