import { ApiError } from '../errors/registry.js';
import { authorize } from '../pipeline/authorize.js';
import { objectTypeAccess } from '../policy/decide.js';
import { recordDecision } from '../pipeline/record-decision.js';
import { authorizeOperation, checkProtectedFields, checkResource } from '../pipeline/stages.js';
import { evaluateRule, type ResourceRow } from '../policy/resource-rule.js';
import type { GraphqlContext } from './context.js';
import type { GraphqlExchange } from './graphql-exchange.js';
import { validateArguments } from './input-validation.js';

/**
 * A root field's decision, through the pipeline's own stages in REST's order: scope and role (authorize),
 * its arguments (validate: no NUL or unpaired surrogate in any string, each ID the contract's `Id`, so that
 * nothing malformed reaches the database), then the resource its `id` names, loaded and checked
 * (load-resource), and for an update the fields its `input` would change that the caller's role may not
 * (check-protected-fields). Recorded in the audit log either way. Resolves to the authorized resource (null when the
 * field names none); a refusal rejects with the registry's ApiError, which the field answers as its error
 * (VALIDATION_FAILED as REST answers a malformed id; NOT_FOUND exactly as for a missing object).
 */
export async function decideRootField(ctx: GraphqlContext, field: string, args: Readonly<Record<string, unknown>>): Promise<ResourceRow | null> {
  const access = ctx.deps.rootFields.get(field);
  // Default deny: codegen refuses a root field without an access rule, so this is a served schema mismatch.
  if (!access) throw new ApiError('FORBIDDEN', `No access rule for ${field}.`);
  const target = access.resource;
  const id = target ? args[target.param] : undefined;
  const ex: GraphqlExchange = {
    ...ctx.exchange,
    operationId: field,
    access,
    resourceId: typeof id === 'string' ? id : undefined,
    resource: null,
    decision: null,
  };
  try {
    authorizeOperation(ex, ctx.deps);
    validateArguments(args);
    await checkResource(ex, ctx.deps);
    // An update's `input` is the resource as the mutation would leave it (REST's PUT body).
    checkProtectedFields(ex, ctx.deps, args.input, false);
    return ex.resource;
  } finally {
    recordDecision(ex, ctx.deps.audit);
  }
}

/**
 * The type's scope and permission (a nested object or a connection of them): throws INSUFFICIENT_SCOPE or
 * FORBIDDEN like a root field would.
 */
export function checkTypeAccess(ctx: GraphqlContext, typeName: string): void {
  const access = objectTypeAccess(ctx.deps.policy, typeName);
  if (access) authorize(ctx.deps.policy, access, ctx.principal);
}

/**
 * A nested object (a post's author, a comment's post): the type's scope and permission, then its resource's
 * read rule. An object the caller may not read is answered exactly like one that does not exist.
 */
export async function readableObject(ctx: GraphqlContext, typeName: string, row: ResourceRow | null): Promise<ResourceRow> {
  if (row === null) throw new ApiError('NOT_FOUND');
  checkTypeAccess(ctx, typeName);
  const resource = ctx.deps.policy.graphqlTypes[typeName]?.resource;
  if (!resource) return row;
  const allowed = await evaluateRule(ctx.deps.policy, resource, 'read', ctx.principal, row, ctx.loaders.loadResource);
  if (!allowed) throw new ApiError('NOT_FOUND');
  return row;
}
