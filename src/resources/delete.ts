import type { Kysely } from 'kysely';
import { deleteRowsWhereIn, selectIdsWhereIn } from '../storage/resource-rows.js';
import type { Database } from '../storage/schema.js';
import type { ResourceRegistry } from './registry.js';
import type { ResourceModule } from './resource-module.js';

/**
 * Deletes resources of a type with everything deleted with them (modules' `deletedWith`, at any depth),
 * children first, in one transaction.
 */
export async function deleteResources(db: Kysely<Database>, resources: ResourceRegistry, module: ResourceModule<unknown>, ids: readonly string[]): Promise<void> {
  await db.transaction().execute((trx) => deleteTree(trx, resources, module, 'id', ids));
}

async function deleteTree(db: Kysely<Database>, resources: ResourceRegistry, module: ResourceModule<unknown>, field: string, values: readonly string[]): Promise<void> {
  const children = resources.deletedWith(module.type);
  if (children.length > 0) {
    const ids = field === 'id' ? values : await selectIdsWhereIn(db, module.table, field, values);
    for (const child of children) await deleteTree(db, resources, child, child.deletedWith!.via, ids);
  }
  await deleteRowsWhereIn(db, module.table, field, values);
}
