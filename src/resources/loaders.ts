import type { LoadResource, ResourceRow } from '../policy/resource-rule.js';
import { loadRows } from '../storage/resource-rows.js';
import type { ResourceStore } from './load.js';
import type { ResourceModule } from './resource-module.js';

/**
 * Per-request batched loaders, one per resource type: every `load(type, id)` made while the request's
 * current work runs is answered by one `where id in (...)` statement per type, and each id is read at most
 * once per request. REST expansions use them, and so will GraphQL resolvers (one instance per request: a
 * loader caches what it read, so it must not outlive the request's view of the data).
 */
export class ResourceLoaders {
  /** Made on the first load: most requests never load through them. */
  private loaders: Map<string, BatchLoader> | null = null;

  constructor(private readonly store: ResourceStore) {}

  load(type: string, id: string): Promise<ResourceRow | null> {
    this.loaders ??= new Map();
    let loader = this.loaders.get(type);
    if (!loader) this.loaders.set(type, (loader = new BatchLoader(this.store, this.store.resources.get(type))));
    return loader.load(id);
  }

  /** These loaders as the policy layer's parent loader: a rule's parent reads are batched too. */
  readonly loadResource: LoadResource = (type, id) => this.load(type, id);
}

interface Waiting {
  resolve(row: ResourceRow | null): void;
  reject(error: unknown): void;
}

class BatchLoader {
  private readonly loaded = new Map<string, Promise<ResourceRow | null>>();
  private batch: Map<string, Waiting> | null = null;

  constructor(
    private readonly store: ResourceStore,
    private readonly module: ResourceModule<unknown>,
  ) {}

  load(id: string): Promise<ResourceRow | null> {
    const known = this.loaded.get(id);
    if (known) return known;
    if (this.batch === null) {
      this.batch = new Map();
      // After the promise jobs queued so far, and those they queue, have run: loads made in `then`
      // callbacks of one another still join the batch (DataLoader's scheduling).
      void Promise.resolve().then(() => process.nextTick(() => this.dispatch()));
    }
    const batch = this.batch;
    const row = new Promise<ResourceRow | null>((resolve, reject) => batch.set(id, { resolve, reject }));
    this.loaded.set(id, row);
    return row;
  }

  private dispatch(): void {
    const batch = this.batch!;
    this.batch = null;
    loadRows(this.store.db, this.store.sqlite, this.module.table, [...batch.keys()]).then(
      (rows) => {
        const byId = new Map(rows.map((row) => [String(row.id), row]));
        for (const [id, waiting] of batch) {
          const row = byId.get(id);
          waiting.resolve(row === undefined ? null : this.module.fromRow(row));
        }
      },
      (error: unknown) => {
        for (const waiting of batch.values()) waiting.reject(error);
      },
    );
  }
}
