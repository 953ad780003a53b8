import type { Principal } from '../policy/principal.js';
import type { ResourceRow } from '../policy/resource-rule.js';
import { loadReadableByIds } from './resources.js';
import type { OperationDeps } from './types.js';
import { viewsOf, type Views } from './views.js';

/** Which embedded member comes from which field and resource type, per expandable resource. */
const EXPANSIONS: Record<string, Record<string, { via: string; type: string }>> = {
  post: { author: { via: 'authorId', type: 'user' } },
  comment: { author: { via: 'authorId', type: 'user' }, post: { via: 'postId', type: 'post' } },
};

/** Normalises `expand` (the contract's array) into a set. */
export function expandSet(expand: readonly string[] | undefined): Set<string> {
  return new Set(expand ?? []);
}

/**
 * Embeds the requested related resources into each item. Each embedded resource passes its own read
 * check (batched: one query per expansion, however many items).
 */
export async function expandAll<T extends 'post' | 'comment'>(
  deps: OperationDeps,
  principal: Principal,
  type: T,
  items: ResourceRow[],
  expand: Set<string>,
): Promise<Views[T][]> {
  const available = EXPANSIONS[type] ?? {};
  let result = items;
  for (const name of expand) {
    const spec = available[name];
    if (!spec) continue;
    const related = await loadReadableByIds(deps, principal, spec.type, result.map((item) => String(item[spec.via])));
    result = result.map((item) => {
      const embedded = related.get(String(item[spec.via]));
      return embedded ? { ...item, [name]: embedded } : item;
    });
  }
  return viewsOf(type, result);
}
