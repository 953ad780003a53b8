import type { Kysely } from 'kysely';
import type { MaybePromise } from '../policy/maybe-promise.js';
import type { LoadResource, ResourceRow } from '../policy/resource-rule.js';
import { loadRow } from '../storage/resource-rows.js';
import type { Database } from '../storage/schema.js';
import type { SqliteHandle } from '../storage/sqlite-handle.js';
import type { ResourceRegistry } from './registry.js';

/** What reading resources needs. */
export interface ResourceStore {
  db: Kysely<Database>;
  /** The embedded database's direct handle (hot reads), or null on PostgreSQL. */
  sqlite: SqliteHandle | null;
  resources: ResourceRegistry;
}

/**
 * One resource by id, or null when it does not exist: the pipeline's per-resource check, which runs on
 * every targeted request, without waiting on SQLite (storage/resource-rows.ts `loadRow`).
 */
export function loadResource(store: ResourceStore, type: string, id: string): MaybePromise<ResourceRow | null> {
  const module = store.resources.get(type);
  const row = loadRow(store.db, store.sqlite, module.table, id);
  if (row instanceof Promise) return row.then((loaded) => (loaded === null ? null : module.fromRow(loaded)));
  return row === null ? null : module.fromRow(row);
}

/** `loadResource` as the policy layer's parent loader. */
export function resourceLoader(store: ResourceStore): LoadResource {
  return (type, id) => loadResource(store, type, id);
}
