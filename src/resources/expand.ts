import { decideAccess, resourceTypeAccess } from '../policy/decide.js';
import type { Principal } from '../policy/principal.js';
import { evaluateRule, type ResourceRow } from '../policy/resource-rule.js';
import type { PolicyTable } from '../policy/table.js';
import type { MaybePromise } from '../policy/maybe-promise.js';
import type { ResourceLoaders } from './loaders.js';
import type { ResourceModule } from './resource-module.js';

/** What an expansion reads with: the request's principal and loaders, and the policy. */
export interface ExpandContext {
  principal: Principal;
  loaders: ResourceLoaders;
  policy: PolicyTable;
}

/**
 * Embeds the requested related resources (`expand`, validated against the contract's enum) into each item,
 * as the module declares them. Each embedded resource passes what a direct read of it would (its type's
 * scope and permission, its read rule), and is left out when it fails: an expansion never shows what a
 * direct read would hide. The loaders batch the reads, one statement
 * per related type however many items.
 */
export function expandAll<View>(
  ctx: ExpandContext,
  module: ResourceModule<View>,
  items: readonly ResourceRow[],
  expand: readonly string[] | undefined,
): MaybePromise<View[]> {
  const names = (expand ?? []).filter((name) => name in module.expansions);
  // Nothing to embed: the views at once, no promise.
  if (names.length === 0) return items.map((item) => module.viewOf(item));
  return embed(ctx, module, items, names);
}

async function embed<View>(ctx: ExpandContext, module: ResourceModule<View>, items: readonly ResourceRow[], names: readonly string[]): Promise<View[]> {
  const expanded = await Promise.all(
    items.map(async (item) => {
      const embedded = await Promise.all(names.map(async (name) => [name, await readable(ctx, module.expansions[name]!.type, item[module.expansions[name]!.via])] as const));
      return embedded.reduce<ResourceRow>((result, [name, related]) => (related === null ? result : { ...result, [name]: related }), item);
    }),
  );
  return expanded.map((item) => module.viewOf(item));
}

/**
 * The resource, when it exists and the principal may read it — its type's scope and permission, then its
 * read rule, as a direct read would check; otherwise null.
 */
async function readable(ctx: ExpandContext, type: string, id: unknown): Promise<ResourceRow | null> {
  if (typeof id !== 'string') return null;
  const access = resourceTypeAccess(ctx.policy, type);
  if (access === null || !decideAccess(ctx.policy, access, ctx.principal).allowed) return null;
  const row = await ctx.loaders.load(type, id);
  if (row === null) return null;
  return (await evaluateRule(ctx.policy, type, 'read', ctx.principal, row, ctx.loaders.loadResource)) ? row : null;
}
