import type { Principal } from '../policy/principal.js';
import { compileRuleFilter } from '../policy/rule-filter.js';
import type { PolicyTable } from '../policy/table.js';
import { filterToSql } from '../storage/filter-sql.js';
import { countRowsWhereIn } from '../storage/resource-rows.js';
import type { ResourceStore } from './load.js';

/**
 * Per-request batched counts of the children a caller may read (a post's comments): every `count` made while
 * the request's current work runs is answered by one grouped statement per child type and parent field,
 * filtered in the database by the child type's read rule, like a list.
 */
export class ReadableCounts {
  private readonly batches = new Map<string, CountBatch>();

  constructor(
    private readonly store: ResourceStore & { policy: PolicyTable },
    private readonly principal: Principal,
  ) {}

  count(childType: string, parentField: string, parentId: string): Promise<number> {
    const key = `${childType}\u0000${parentField}`;
    let batch = this.batches.get(key);
    if (!batch) this.batches.set(key, (batch = new CountBatch(this.store, this.principal, childType, parentField)));
    return batch.count(parentId);
  }
}

class CountBatch {
  private readonly counted = new Map<string, Promise<number>>();
  private pending: Map<string, { resolve(count: number): void; reject(error: unknown): void }> | null = null;

  constructor(
    private readonly store: ResourceStore & { policy: PolicyTable },
    private readonly principal: Principal,
    private readonly childType: string,
    private readonly parentField: string,
  ) {}

  count(parentId: string): Promise<number> {
    const known = this.counted.get(parentId);
    if (known) return known;
    if (this.pending === null) {
      this.pending = new Map();
      // The loaders' scheduling (loaders.ts): counts asked in callbacks of one another join the batch.
      void Promise.resolve().then(() => process.nextTick(() => this.dispatch()));
    }
    const pending = this.pending;
    const result = new Promise<number>((resolve, reject) => pending.set(parentId, { resolve, reject }));
    this.counted.set(parentId, result);
    return result;
  }

  private dispatch(): void {
    const pending = this.pending!;
    this.pending = null;
    const module = this.store.resources.get(this.childType);
    const filter = compileRuleFilter(this.store.policy, this.childType, 'read', this.principal);
    countRowsWhereIn(this.store.db, module.table, this.parentField, [...pending.keys()], [(eb) => filterToSql(eb, filter, this.store.resources.tableOf)]).then(
      (counts) => {
        for (const [id, waiting] of pending) waiting.resolve(counts.get(id) ?? 0);
      },
      (error: unknown) => {
        for (const waiting of pending.values()) waiting.reject(error);
      },
    );
  }
}
