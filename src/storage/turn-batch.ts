import type { Kysely, Selectable } from 'kysely';
import type { Db } from './dialect.js';
import { kyselyGrantStore, sameRegistrationState, sqliteGrantStore, type GrantStore, type RegistrationState } from './grant-store.js';
import type { Database } from './schema.js';
import type { SqliteHandle } from './sqlite-handle.js';
import type { TokenRow, TokenTable } from './token-rows.js';
import { writeTransaction } from './write-transaction.js';

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
 * The client registration a request's token was issued under, as the request saw it. The commit stores
 * the rows only if the registration is unchanged (grant-store.ts RegistrationState), reading it in the
 * commit's own transaction (on PostgreSQL with FOR SHARE): a change that revokes the client's tokens (a
 * secret rotated after a leak) locks the registration first, so either it commits first and the rows are
 * refused, or it waits for this commit and revokes them with the rest. Nothing minted under an old secret
 * outlives the rotation. A token without rows (a self-contained JWT) is checked the same way, by a read
 * alone: it is answered only if the registration was still the one it was issued under after it was made.
 */
export interface RegistrationGuard extends RegistrationState {
  clientRegistrationId: string;
}

/** Why a request's rows were not stored: its client registration changed (or went) before they could be. */
export class StaleRegistrationError extends Error {
  readonly code = 'PORTCULLIS_STALE_REGISTRATION';

  constructor() {
    super('The client registration changed before the rows were committed');
    this.name = 'StaleRegistrationError';
  }
}

/** Rows to insert, guarded by the registration they were issued under. */
interface RowsWaiter {
  kind: 'rows';
  rows: readonly TokenRow[];
  guard: RegistrationGuard | null;
  resolve(): void;
  reject(error: BatchCommitError | StaleRegistrationError): void;
}

/** Work that decides against the database (a grant's transaction, grant-commit.ts), run inside the shared commit. */
interface WorkWaiter {
  kind: 'work';
  work(store: GrantStore): Promise<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

type Waiter = RowsWaiter | WorkWaiter;

/** What a work came to inside the transaction; settled on its waiter only once the commit is done. */
type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Commits the rows and work that requests hand in during one event-loop turn in one transaction, and settles
 * each request's promise once that commit is done: a token is answered only after its row is durable, and a
 * commit costs once per turn what it used to cost per token (on SQLite writing every page the turn
 * changed to the WAL; on PostgreSQL a round trip and a flush). A failed commit fails exactly the requests
 * that were in it.
 *
 * `write` takes inserts of rows that no other request reads before its own request has answered (a token's
 * row is read when the token comes back). `transact` takes work that must decide against the database — a
 * grant using up its code or refresh token and storing its tokens under the user's lock: on SQLite it
 * joins the turn's transaction (the single writer: nothing else writes between its reads and its writes),
 * each work in a savepoint of its own so that one that throws leaves nothing behind; on PostgreSQL, where
 * it takes row locks, it runs in a transaction of its own at once.
 *
 * On SQLite everything runs through prepared statements on the connection Kysely owns, inside
 * `kysely.connection()`, so no Kysely transaction is open around them (sqlite-handle.ts): a request never
 * reads another request's uncommitted rows. For the same reason a caller must not wait for `write` or
 * `transact` while it holds a Kysely transaction or connection itself: the commit would wait for that
 * connection.
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
  write(rows: readonly TokenRow[], guard: RegistrationGuard | null = null): Promise<void> {
    return new Promise((resolve, reject) => this.#enqueue({ kind: 'rows', rows, guard, resolve, reject }));
  }

  /**
   * Runs `work` in a write transaction and resolves with what it returned once that transaction has
   * committed. When it throws, what it wrote is undone and the promise rejects with its error; when the
   * commit fails, with BatchCommitError.
   */
  transact<T>(work: (store: GrantStore) => Promise<T>): Promise<T> {
    const { kysely, sqlite } = this.#db;
    if (!sqlite) return writeTransaction(kysely, (trx) => work(kyselyGrantStore(trx)));
    return new Promise<T>((resolve, reject) => this.#enqueue({ kind: 'work', work, resolve: resolve as (value: unknown) => void, reject }));
  }

  #enqueue(waiter: Waiter): void {
    // The first of a turn schedules the commit: setImmediate runs after the turn's I/O callbacks.
    if (this.#pending.length === 0) setImmediate(() => this.#commit());
    this.#pending.push(waiter);
  }

  #commit(): void {
    const waiters = this.#pending;
    this.#pending = [];
    const { kysely, sqlite } = this.#db;
    const committed = sqlite
      ? kysely.connection().execute(async () => commitOnSqlite(sqlite, sqliteGrantStore(sqlite, kysely), waiters))
      : commitOnPostgres(kysely, waiters as RowsWaiter[]);
    committed.then(
      ({ stale, outcomes }) => {
        for (const waiter of waiters) {
          if (waiter.kind === 'rows') {
            if (stale.has(waiter)) waiter.reject(new StaleRegistrationError());
            else waiter.resolve();
            continue;
          }
          const outcome = outcomes.get(waiter)!;
          if (outcome.ok) waiter.resolve(outcome.value);
          else waiter.reject(outcome.error);
        }
      },
      (error: unknown) => {
        const failed = new BatchCommitError(error);
        for (const waiter of waiters) waiter.reject(failed);
      },
    );
  }
}

interface Committed {
  stale: Set<RowsWaiter>;
  outcomes: Map<WorkWaiter, Outcome>;
}

/** The waiters whose guard no longer matches the registration as `current` reads it. */
function staleWaiters(waiters: readonly RowsWaiter[], current: ReadonlyMap<string, RegistrationState>): Set<RowsWaiter> {
  return new Set(waiters.filter(({ guard }) => guard !== null && !sameRegistrationState(current.get(guard.clientRegistrationId) ?? null, guard)));
}

/** Whether the turn writes anything: a turn of guards alone reads the registrations without a transaction. */
function writes(waiters: readonly Waiter[]): boolean {
  return waiters.some((waiter) => waiter.kind === 'work' || waiter.rows.length > 0);
}

function guardedIds(waiters: readonly RowsWaiter[]): string[] {
  return [...new Set(waiters.flatMap(({ guard }) => (guard === null ? [] : [guard.clientRegistrationId])))];
}

/**
 * One BEGIN IMMEDIATE for the turn: the single writer, so a registration read here cannot change before
 * this transaction commits, and a work's reads stay true until its writes. The store's statements run
 * synchronously; a work awaits nothing else unless a test seam makes it, and meanwhile the connection stays
 * held, so no other statement of this process runs inside the transaction.
 */
async function commitOnSqlite(handle: SqliteHandle, store: GrantStore, waiters: readonly Waiter[]): Promise<Committed> {
  const run = (sql: string) => handle.prepare(sql).run();
  const rowWaiters = waiters.filter((waiter): waiter is RowsWaiter => waiter.kind === 'rows');
  const outcomes = new Map<WorkWaiter, Outcome>();
  const transaction = writes(waiters);
  if (transaction) await handle.beginImmediate();
  try {
    const current = new Map<string, RegistrationState>();
    for (const id of guardedIds(rowWaiters)) {
      const registration = await store.lockClientRegistration(id);
      if (registration !== null) current.set(id, registration);
    }
    const stale = staleWaiters(rowWaiters, current);
    for (const waiter of rowWaiters) if (!stale.has(waiter)) await store.insertRows(waiter.rows);
    for (const waiter of waiters) {
      if (waiter.kind !== 'work') continue;
      run('savepoint work');
      try {
        outcomes.set(waiter, { ok: true, value: await waiter.work(store) });
      } catch (error) {
        run('rollback to work');
        outcomes.set(waiter, { ok: false, error });
      }
      run('release work');
    }
    if (transaction) run('commit');
    return { stale, outcomes };
  } catch (error) {
    // SQLite may have rolled back already (a full disk, say); the error that ended the commit is the one to report.
    if (handle.inTransaction) run('rollback');
    throw error;
  }
}

async function commitOnPostgres(kysely: Kysely<Database>, waiters: readonly RowsWaiter[]): Promise<Committed> {
  if (!writes(waiters)) return { stale: staleWaiters(waiters, await readRegistrations(kysely, guardedIds(waiters), false)), outcomes: new Map() };
  return kysely.transaction().execute(async (trx) => {
    // FOR SHARE: a revocation that locks the registration (revokeClientTokens) waits for this commit, or
    // this read waits for it and sees the registration as it left it.
    const stale = staleWaiters(waiters, await readRegistrations(trx, guardedIds(waiters), true));
    const byTable: { [T in TokenTable]: Selectable<Database[T]>[] } = { accessTokens: [], refreshTokens: [] };
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
    return { stale, outcomes: new Map() };
  });
}

async function readRegistrations(db: Kysely<Database>, ids: readonly string[], forShare: boolean): Promise<Map<string, RegistrationState>> {
  if (ids.length === 0) return new Map();
  const query = db.selectFrom('clients').select(['id', 'updatedAt', 'revocations']).where('id', 'in', ids);
  const rows = await (forShare ? query.forShare() : query).execute();
  // An integer column comes back from PostgreSQL as a number; Number() keeps the comparison exact either way.
  return new Map(rows.map((row) => [row.id, { updatedAt: row.updatedAt, revocations: Number(row.revocations) }]));
}
