import type { Statement } from 'better-sqlite3';
import type { SqliteHandle } from '../../src/storage/sqlite-handle.js';

type Method = 'get' | 'all' | 'iterate' | 'run';

/**
 * The handle with the statements it prepares watched: `watch(sql)` names the methods to watch on the statement
 * of that SQL (none: the statement as it is), and `called` runs once each call of one of them has returned,
 * with the statement, the method, the call's result and the SQL. Everything else is the handle's own.
 */
export function watchStatements(
  handle: SqliteHandle,
  watch: (sql: string) => readonly Method[],
  called: (call: { statement: Statement; method: Method; result: unknown; sql: string }) => void,
): SqliteHandle {
  return {
    prepare(sql: string) {
      const statement = handle.prepare(sql);
      const methods = watch(sql);
      if (methods.length === 0) return statement;
      return new Proxy(statement, {
        get(target, property, receiver) {
          const value = Reflect.get(target, property, receiver);
          if (typeof value !== 'function') return value;
          if (!methods.includes(property as Method)) return value.bind(target);
          return (...args: unknown[]) => {
            const result = (value as (...a: unknown[]) => unknown).apply(target, args);
            called({ statement: target, method: property as Method, result, sql });
            return result;
          };
        },
      }) as Statement;
    },
    get inTransaction() {
      return handle.inTransaction;
    },
    beginImmediate: () => handle.beginImmediate(),
    immediateTransaction: (run) => handle.immediateTransaction(run),
    backup: (file) => handle.backup(file),
  };
}
