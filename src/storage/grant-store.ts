import type { CompiledQuery, Compilable, Kysely } from 'kysely';
import { camelCaseSelect } from './camel-case-select.js';
import type { LockedUser } from './row-locks.js';
import type { AuthorizationCodeOutcome, Database } from './schema.js';
import type { Db } from './dialect.js';
import type { RefreshTokenRow } from './refresh-tokens.js';
import type { SqliteHandle } from './sqlite-handle.js';
import { nowIso } from './ids.js';
import { noteInvalidationWritten } from './invalidations.js';
import { TOKEN_COLUMNS, tokenRowValues, type TokenRow, type TokenTable } from './token-rows.js';
import { isSqlite } from './write-transaction.js';

/**
 * What a request that read a client registration checks again where it commits (a grant's transaction, a
 * token's guard, turn-batch.ts): the registration is unchanged — the same `updatedAt` (a new secret, fewer
 * scopes) and the same `revocations` (its tokens revoked meanwhile).
 */
export interface RegistrationState {
  updatedAt: string;
  revocations: number;
}

export function sameRegistrationState(a: RegistrationState | null, b: RegistrationState): boolean {
  return a !== null && a.updatedAt === b.updatedAt && a.revocations === b.revocations;
}

/**
 * What a user grant's transaction reads and writes (oauth/grants/grant-commit.ts): its locks, the use of
 * its code or refresh token, the revocation of a replayed grant, its token rows. Each statement is written
 * once, with Kysely, and compiled once per dialect; it then runs either through Kysely (PostgreSQL, and
 * anywhere a Kysely transaction is the caller's) or as a prepared statement on the embedded database's own
 * handle (the SQLite grants that share one event-loop turn's commit, turn-batch.ts), where a Kysely round
 * would cost several times the statement.
 */
export interface GrantStore {
  /** The user's row lock (PostgreSQL; on SQLite the write transaction already excludes every writer); null: no such user. */
  lockUser(userId: string): Promise<LockedUser | null>;
  /** The registration's shared lock; its state, or null when it is gone. */
  lockClientRegistration(clientRegistrationId: string): Promise<RegistrationState | null>;
  findRefreshToken(tokenHash: string): Promise<RefreshTokenRow | null>;
  /** Marks the refresh token used if it is neither used nor revoked; false otherwise. */
  rotateRefreshToken(tokenHash: string, rotatedAt: string): Promise<boolean>;
  refreshTokenState(tokenHash: string): Promise<{ rotatedAt: string | null; revokedAt: string | null } | null>;
  /** Marks the code redeemed, with what its exchange came to, if nobody has; false otherwise. */
  redeemAuthorizationCode(codeHash: string, redeemedAt: string, outcome: Exclude<AuthorizationCodeOutcome, 'withdrawn'>): Promise<boolean>;
  /** What the code's redemption came to (null for rows from before outcomes were recorded); undefined: no such code. */
  authorizationCodeOutcome(codeHash: string): Promise<AuthorizationCodeOutcome | null | undefined>;
  /** Marks an approved device code redeemed; false when it is not approved (any more). */
  redeemDeviceCode(deviceCodeHash: string): Promise<boolean>;
  deviceCodeStatus(deviceCodeHash: string): Promise<string | null>;
  /**
   * Ends one user grant: its access tokens and refresh family, with the invalidation every server follows.
   * False when nothing was left to end (a replay of a grant revoked already): then nothing is written.
   */
  revokeGrant(grantId: string, revokedAt: string): Promise<boolean>;
  insertRows(rows: readonly TokenRow[]): Promise<void>;
}

/** A placeholder for a parameter: statements are compiled once, and each call binds its own values in order. */
const P = '';

/**
 * The statements, each with its parameters in the order they are bound. A statement builds against the
 * dialect it compiles for, so that PostgreSQL's row locks are part of it and SQLite's absence of them is not.
 */
const STATEMENTS = {
  // NO KEY UPDATE conflicts with an UPDATE of the user (a password or status change) and with itself.
  lockUser: (db: Kysely<Database>) => {
    const query = db.selectFrom('users').select(['active', 'updatedAt', 'revocations']).where('id', '=', P);
    return isSqlite(db) ? query : query.forNoKeyUpdate();
  },
  // FOR SHARE: grants of many users to one client go on side by side; a revocation by client waits.
  lockClientRegistration: (db: Kysely<Database>) => {
    const query = db.selectFrom('clients').select(['updatedAt', 'revocations']).where('id', '=', P);
    return isSqlite(db) ? query : query.forShare();
  },
  findRefreshToken: (db: Kysely<Database>) => db.selectFrom('refreshTokens').selectAll().where('tokenHash', '=', P),
  // [rotatedAt, tokenHash]
  rotateRefreshToken: (db: Kysely<Database>) =>
    db.updateTable('refreshTokens').set({ rotatedAt: P }).where('tokenHash', '=', P).where('rotatedAt', 'is', null).where('revokedAt', 'is', null),
  refreshTokenState: (db: Kysely<Database>) => db.selectFrom('refreshTokens').select(['rotatedAt', 'revokedAt']).where('tokenHash', '=', P),
  // [redeemedAt, outcome, codeHash]
  redeemAuthorizationCode: (db: Kysely<Database>) =>
    db.updateTable('authorizationCodes').set({ redeemedAt: P, outcome: P as AuthorizationCodeOutcome }).where('codeHash', '=', P).where('redeemedAt', 'is', null),
  authorizationCodeOutcome: (db: Kysely<Database>) => db.selectFrom('authorizationCodes').select('outcome').where('codeHash', '=', P),
  // ['redeemed', deviceCodeHash, 'approved']
  redeemDeviceCode: (db: Kysely<Database>) => db.updateTable('deviceCodes').set({ status: P }).where('deviceCodeHash', '=', P).where('status', '=', P),
  deviceCodeStatus: (db: Kysely<Database>) => db.selectFrom('deviceCodes').select('status').where('deviceCodeHash', '=', P),
  // [revokedAt, grantId]
  revokeGrantAccessTokens: (db: Kysely<Database>) =>
    db.updateTable('accessTokens').set({ revokedAt: P }).where('grantId', '=', P).where('revokedAt', 'is', null),
  revokeGrantRefreshTokens: (db: Kysely<Database>) =>
    db.updateTable('refreshTokens').set({ revokedAt: P }).where('familyId', '=', P).where('revokedAt', 'is', null),
  // [kind, target, createdAt]
  recordInvalidation: (db: Kysely<Database>) => db.insertInto('invalidations').values({ kind: P, target: P, createdAt: P }),
  insertAccessToken: (db: Kysely<Database>) => insertEveryColumn(db, 'accessTokens'),
  insertRefreshToken: (db: Kysely<Database>) => insertEveryColumn(db, 'refreshTokens'),
} satisfies Record<string, (db: Kysely<Database>) => Compilable>;

type StatementName = keyof typeof STATEMENTS;

/** Parameters in the order of TOKEN_COLUMNS, which `insertRows` binds. */
function insertEveryColumn(db: Kysely<Database>, table: TokenTable): Compilable {
  const row = Object.fromEntries(TOKEN_COLUMNS[table].map((column) => [column, P]));
  return db.insertInto(table).values(row as never);
}

/** Parameter counts the statements above bind; a statement that compiles to another count fails at once. */
const PARAMETERS: Readonly<Record<StatementName, number>> = {
  lockUser: 1,
  lockClientRegistration: 1,
  findRefreshToken: 1,
  rotateRefreshToken: 2,
  refreshTokenState: 1,
  redeemAuthorizationCode: 3,
  authorizationCodeOutcome: 1,
  redeemDeviceCode: 3,
  deviceCodeStatus: 1,
  revokeGrantAccessTokens: 2,
  revokeGrantRefreshTokens: 2,
  recordInvalidation: 3,
  insertAccessToken: TOKEN_COLUMNS.accessTokens.length,
  insertRefreshToken: TOKEN_COLUMNS.refreshTokens.length,
};

const compiled = { sqlite: new Map<StatementName, CompiledQuery>(), postgres: new Map<StatementName, CompiledQuery>() };

function compile(db: Kysely<Database>, name: StatementName): CompiledQuery {
  const byName = isSqlite(db) ? compiled.sqlite : compiled.postgres;
  let query = byName.get(name);
  if (!query) {
    query = STATEMENTS[name](db).compile();
    if (query.parameters.length !== PARAMETERS[name]) throw new Error(`${name} binds ${query.parameters.length} parameters, not ${PARAMETERS[name]}`);
    byName.set(name, query);
  }
  return query;
}

/** SELECTs as run on the handle: wrapped so that each column comes back named as Kysely names it. */
const sqliteSelects = new Map<StatementName, string>();

/** How the store's statements run: the row of a SELECT (named as Kysely names it), the rows an UPDATE changed. */
interface Runner {
  /** The first row, or undefined. */
  row<R>(name: StatementName, parameters: readonly unknown[]): Promise<R | undefined>;
  changes(name: StatementName, parameters: readonly unknown[]): Promise<number>;
}

class StatementGrantStore implements GrantStore {
  readonly #run: Runner;

  constructor(runner: Runner) {
    this.#run = runner;
  }

  async lockUser(userId: string): Promise<LockedUser | null> {
    const row = await this.#run.row<{ active: boolean | number; updatedAt: string; revocations: number | string }>('lockUser', [userId]);
    return row ? { active: Boolean(row.active), updatedAt: row.updatedAt, revocations: Number(row.revocations) } : null;
  }

  async lockClientRegistration(clientRegistrationId: string): Promise<RegistrationState | null> {
    const row = await this.#run.row<{ updatedAt: string; revocations: number | string }>('lockClientRegistration', [clientRegistrationId]);
    return row ? { updatedAt: row.updatedAt, revocations: Number(row.revocations) } : null;
  }

  async findRefreshToken(tokenHash: string): Promise<RefreshTokenRow | null> {
    const row = await this.#run.row<RefreshTokenRow>('findRefreshToken', [tokenHash]);
    return row ?? null;
  }

  async rotateRefreshToken(tokenHash: string, rotatedAt: string): Promise<boolean> {
    return (await this.#run.changes('rotateRefreshToken', [rotatedAt, tokenHash])) === 1;
  }

  async refreshTokenState(tokenHash: string): Promise<{ rotatedAt: string | null; revokedAt: string | null } | null> {
    const row = await this.#run.row<{ rotatedAt: string | null; revokedAt: string | null }>('refreshTokenState', [tokenHash]);
    return row ?? null;
  }

  async redeemAuthorizationCode(codeHash: string, redeemedAt: string, outcome: Exclude<AuthorizationCodeOutcome, 'withdrawn'>): Promise<boolean> {
    return (await this.#run.changes('redeemAuthorizationCode', [redeemedAt, outcome, codeHash])) === 1;
  }

  async authorizationCodeOutcome(codeHash: string): Promise<AuthorizationCodeOutcome | null | undefined> {
    const row = await this.#run.row<{ outcome: AuthorizationCodeOutcome | null }>('authorizationCodeOutcome', [codeHash]);
    return row?.outcome;
  }

  async redeemDeviceCode(deviceCodeHash: string): Promise<boolean> {
    return (await this.#run.changes('redeemDeviceCode', ['redeemed', deviceCodeHash, 'approved'])) === 1;
  }

  async deviceCodeStatus(deviceCodeHash: string): Promise<string | null> {
    const row = await this.#run.row<{ status: string }>('deviceCodeStatus', [deviceCodeHash]);
    return row?.status ?? null;
  }

  async revokeGrant(grantId: string, revokedAt: string): Promise<boolean> {
    const accessTokens = await this.#run.changes('revokeGrantAccessTokens', [revokedAt, grantId]);
    const refreshTokens = await this.#run.changes('revokeGrantRefreshTokens', [revokedAt, grantId]);
    if (accessTokens + refreshTokens === 0) return false;
    await this.#run.changes('recordInvalidation', ['grant', grantId, nowIso()]);
    noteInvalidationWritten();
    return true;
  }

  async insertRows(rows: readonly TokenRow[]): Promise<void> {
    for (const row of rows) {
      await this.#run.changes(row.table === 'accessTokens' ? 'insertAccessToken' : 'insertRefreshToken', tokenRowValues(row));
    }
  }
}

/** The store on a Kysely connection or transaction: the caller's transaction is the grant's. */
export function kyselyGrantStore(db: Kysely<Database>): GrantStore {
  return new StatementGrantStore({
    row: async <R>(name: StatementName, parameters: readonly unknown[]) => (await db.executeQuery<R>({ ...compile(db, name), parameters })).rows[0],
    changes: async (name, parameters) => Number((await db.executeQuery({ ...compile(db, name), parameters })).numAffectedRows ?? 0),
  });
}

/**
 * The store on the embedded database's handle, each statement run synchronously. Only for a caller that
 * holds the connection and has begun the write transaction itself (turn-batch.ts).
 */
export function sqliteGrantStore(handle: SqliteHandle, kysely: Kysely<Database>): GrantStore {
  let store = sqliteStores.get(handle);
  if (!store) sqliteStores.set(handle, (store = newSqliteGrantStore(handle, kysely)));
  return store;
}

const sqliteStores = new WeakMap<SqliteHandle, GrantStore>();

function newSqliteGrantStore(handle: SqliteHandle, kysely: Kysely<Database>): GrantStore {
  const selectSql = (name: StatementName): string => {
    let sql = sqliteSelects.get(name);
    if (sql === undefined) {
      const { sql: plain } = compile(kysely, name);
      sql = camelCaseSelect(plain, handle.prepare(plain).columns().map((column) => column.name));
      sqliteSelects.set(name, sql);
    }
    return sql;
  };
  return new StatementGrantStore({
    row: async <R>(name: StatementName, parameters: readonly unknown[]) => handle.prepare(selectSql(name)).get(parameters) as R | undefined,
    changes: async (name, parameters) => handle.prepare(compile(kysely, name).sql).run(parameters).changes,
  });
}

/**
 * The store for what a grant reads before its transaction (the refresh token it presents): on SQLite
 * straight off the handle while no transaction holds the connection (it then reads only what is
 * committed), otherwise through Kysely. Call a method at once: the choice holds for the current tick.
 */
export function grantReadStore(db: Db): GrantStore {
  return db.sqlite && !db.sqlite.inTransaction ? sqliteGrantStore(db.sqlite, db.kysely) : kyselyGrantStore(db.kysely);
}
