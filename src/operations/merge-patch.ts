import type { OperationId } from '../../generated/routes.js';
import type { ResourceModule } from '../resources/resource-module.js';
import type { Handler, OperationInput } from './types.js';

/** RFC 7396 §2, MergePatch(Target, Patch): members named in the patch change, `null` removes one. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const result: Record<string, unknown> = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [name, value] of Object.entries(patch as Record<string, unknown>)) {
    if (value === null) delete result[name];
    else result[name] = applyMergePatch(result[name], value);
  }
  return result;
}

/**
 * A PATCH operation (`application/merge-patch+json`) as its PUT twin: the resource's current state as a
 * replacement body (the fields the replacement takes), the patch merged into it, the result checked against
 * the replacement's contract (400 with `/body/...` details when the patch leaves it invalid, a required
 * field removed say), then the replacement's own handler: the same conflicts, side effects and answer as a
 * PUT of the merged body (its protected fields were checked on the merged body before, by the pipeline).
 */
export function mergePatchOf<P extends OperationId, R extends OperationId>(replaceId: R, replace: Handler<R>, module: ResourceModule<unknown>): Handler<P> {
  return async (input, ctx) => {
    const replacement = ctx.deps.replacement(replaceId);
    const current = module.viewOf(ctx.resource!) as Record<string, unknown>;
    const base = Object.fromEntries(replacement.fields.filter((field) => field in current).map((field) => [field, current[field]]));
    const body = replacement.check(applyMergePatch(base, input.body));
    return (await replace({ ...input, body } as unknown as OperationInput<R>, ctx)) as never;
  };
}
