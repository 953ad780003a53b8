import type { ResourceRow } from '../policy/resource-rule.js';
import type { ResourceTable, StoredRow } from '../storage/resource-rows.js';

/** `expand=<name>`: the field holding the related resource's id, and that resource's type. */
export interface Expansion {
  via: string;
  type: string;
}

/**
 * Everything every resource type has, in one place: its policy type, its table and columns, how a stored
 * row becomes its representation, what `expand=` embeds, which fields a list is filtered by, and what is
 * deleted with it. REST handlers, the pipeline's per-resource check, the batched loaders (loaders.ts) and
 * the list queries (lists.ts) read only this; `registry.ts` lists every module.
 */
export interface ResourceModule<View = ResourceRow> {
  /** The resource type of policy.yaml and `x-resource`. */
  readonly type: string;
  readonly table: ResourceTable;
  /** A stored row as the policy layer and the handlers see it: booleans restored, JSON decoded. */
  fromRow(row: StoredRow): ResourceRow;
  /**
   * The contract's expansions (the `expand` parameter's enum of the operations serving this type; a test
   * keeps the two in agreement).
   */
  readonly expansions: Readonly<Record<string, Expansion>>;
  /** Fields a list of this type is filtered by, each by equality (query parameters or path parameters). */
  readonly filters: readonly string[];
  /** A resource of this type is deleted with the resource its `via` field names (a comment with its post). */
  readonly deletedWith: Expansion | null;
  /**
   * The representation of a row of this type. Rows are written only from validated contract inputs and
   * read through `fromRow`, so a row has the contract's shape; this is where the type checker is told so.
   */
  viewOf(row: ResourceRow): View;
}

export type ResourceDefinition = Omit<ResourceModule, 'viewOf' | 'fromRow' | 'expansions' | 'filters' | 'deletedWith'> &
  Partial<Pick<ResourceModule, 'fromRow' | 'expansions' | 'filters' | 'deletedWith'>>;

/** A module from its declaration; a table whose rows are their representation needs no `fromRow`. */
export function defineResource<View>(definition: ResourceDefinition): ResourceModule<View> {
  return {
    fromRow: (row) => row,
    expansions: {},
    filters: [],
    deletedWith: null,
    ...definition,
    viewOf: (row) => row as unknown as View,
  };
}
