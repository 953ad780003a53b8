import { addressKey } from '../limits/address-key.js';
import type { AuditDecision } from '../audit/audit-event.js';
import { ApiError } from '../errors/registry.js';
import type { TokenService } from '../oauth/tokens/token-service.js';
import type { RateLimiter, RateLimitResult } from '../limits/rate-limit.js';
import { forbiddenFieldChanges } from '../policy/protected-fields.js';
import { evaluateRule, type ResourceRow } from '../policy/resource-rule.js';
import type { PolicyTable } from '../policy/table.js';
import { loadResource, resourceLoader } from '../resources/load.js';
import { applyMergePatch } from '../operations/merge-patch.js';
import type { OperationDeps } from '../operations/types.js';
import { authenticate, hasVerifiedBearer } from './authenticate.js';
import { authorize } from './authorize.js';
import type { Exchange } from './exchange.js';
import type { StageResult } from './pipeline.js';
import type { SubjectDirectory } from './subject-directory.js';

/** What the access stages need, whatever the transport. */
export interface PipelineDeps {
  policy: PolicyTable;
  tokens: TokenService;
  subjects: SubjectDirectory;
  limiter: RateLimiter;
  operations: OperationDeps;
}

/**
 * Bearer token -> principal. A refused credential (invalid token: 401; token in the URL: 400) is an
 * authentication denial, audited and counted against the caller's IP like any anonymous request.
 */
export function identify(ex: Exchange, deps: PipelineDeps): StageResult {
  let principal;
  try {
    principal = authenticate(ex.credentials, deps);
  } catch (error) {
    return refuseCredential(ex, deps, error);
  }
  if (principal instanceof Promise) {
    return principal.then(
      (resolved) => {
        ex.principal = resolved;
      },
      (error: unknown) => refuseCredential(ex, deps, error),
    );
  }
  ex.principal = principal;
}

function refuseCredential(ex: Exchange, deps: PipelineDeps, error: unknown): Promise<never> | never {
  if (!(error instanceof ApiError)) throw error;
  ex.decision = { decision: 'deny', reason: 'authentication' };
  // A refused credential spends the address's anonymous budget: guessing tokens is limited like probing.
  const charged = charge(ex, deps.limiter.anonymous.take(addressKey(ex.sourceAddress)));
  if (charged instanceof Promise) {
    return charged.then(() => {
      throw error;
    });
  }
  throw error;
}

/**
 * Stage 1, before any token is verified: every request that carries a credential this server has not
 * verified yet spends the address's budget, so a flood of forged or random tokens is refused before it
 * costs a signature check or a database read. Hot tokens skip it (their clients have their own budget), and
 * so do requests without credentials (they cost no verification; the anonymous budget limits them), so
 * that anonymous traffic from an address behind NAT does not lock out its users' fresh tokens.
 */
export function limitAddress(ex: Exchange, deps: PipelineDeps): StageResult {
  const authorization = ex.credentials.authorization;
  if (authorization === undefined || authorization === '' || hasVerifiedBearer(ex.credentials, deps.tokens)) return;
  return charge(ex, deps.limiter.address.take(addressKey(ex.sourceAddress)), false);
}

/**
 * Stage 3, once the caller is known: per client, and a user's token draws on the user's budget too; per
 * address for anonymous callers. 429 with Retry-After once a budget is spent.
 */
export function limit(ex: Exchange, deps: PipelineDeps): StageResult {
  return chargeCaller(ex, deps, 1);
}

/**
 * Takes `weight` points from the budgets of the caller the exchange has identified (a GraphQL request
 * weighs its computed cost: `limit` took one point, the rest is taken once the document is measured).
 * Synchronous while the counters are in this process.
 */
export function chargeCaller(ex: Exchange, deps: PipelineDeps, weight: number): StageResult {
  const principal = ex.principal;
  if (principal.kind === 'anonymous') return charge(ex, deps.limiter.anonymous.take(addressKey(ex.sourceAddress), weight));
  const clientId = principal.clientId;
  const client = deps.limiter.client.take(clientId, weight, principal.clientRateLimit);
  if (principal.kind === 'client') return charge(ex, client);
  const user = deps.limiter.user.take(principal.subject, weight);
  if (user instanceof Promise || client instanceof Promise) {
    return charge(ex, Promise.all([user, client]).then(([byUser, byClient]) => userFirst(deps, clientId, weight, byUser, byClient)));
  }
  return charge(ex, userFirst(deps, clientId, weight, user, client));
}

/**
 * A user's request the user's own budget refuses gives its points back to the client's, which the client's
 * other users share: one user retrying past their own budget must not spend everyone else's. (The refused
 * request still counts against the user, so that retrying early does not help.) Both budgets are asked at
 * once, so that a shared store answers in one round trip.
 */
function userFirst(deps: PipelineDeps, clientId: string, weight: number, user: RateLimitResult, client: RateLimitResult): RateLimitResult {
  if (!user.allowed) void deps.limiter.client.refund(clientId, weight).catch(() => {});
  return tighter(user, client);
}

/**
 * The most one request may weigh: the smallest budget per window the caller draws on (its client's and, for a
 * user's token, the user's; an anonymous caller's address). A GraphQL operation that costs more could never
 * run, and charging it would only spend the caller's whole budget on a refusal.
 */
export function largestCharge(ex: Exchange, deps: PipelineDeps): number {
  const principal = ex.principal;
  if (principal.kind === 'anonymous') return deps.limiter.anonymous.points;
  const client = principal.clientRateLimit ?? deps.limiter.client.points;
  return principal.kind === 'client' ? client : Math.min(client, deps.limiter.user.points);
}

/** The budget that refuses, or the one closer to running out (the client's on a tie). */
function tighter(user: RateLimitResult, client: RateLimitResult): RateLimitResult {
  if (user.allowed !== client.allowed) return user.allowed ? client : user;
  return user.remaining < client.remaining ? user : client;
}

/**
 * Applies a budget's answer: the caller is told about it (unless only refusals should show it), and 429
 * when it is spent.
 */
function charge(ex: Exchange, answer: RateLimitResult | Promise<RateLimitResult>, report = true): StageResult {
  if (answer instanceof Promise) return answer.then((result) => admit(ex, result, report));
  admit(ex, answer, report);
}

function admit(ex: Exchange, result: RateLimitResult, report: boolean): void {
  if (report || !result.allowed) ex.rateLimit = result;
  if (!result.allowed) throw rateLimited(result.resetSeconds);
}

/** The refusal of a spent budget, whichever it is: 429 with Retry-After. */
export function rateLimited(resetSeconds: number): ApiError {
  return new ApiError('RATE_LIMITED', `Too many requests; retry in ${resetSeconds} s.`, { headers: { 'retry-after': String(resetSeconds) } });
}

/** The check a coarse refusal came from, by the error it was answered with (anything else: the role). */
const DENIAL_REASONS: Readonly<Partial<Record<string, AuditDecision['reason']>>> = { UNAUTHENTICATED: 'authentication', INSUFFICIENT_SCOPE: 'scope' };

/** Scope, then role. */
export function authorizeOperation(ex: Exchange, deps: PipelineDeps): void {
  try {
    const decision = authorize(deps.policy, ex.access, ex.principal);
    ex.decision = { decision: 'allow', reason: decision.reason };
  } catch (error) {
    const reason = error instanceof ApiError ? DENIAL_REASONS[error.code] ?? 'role' : 'role';
    ex.decision = { decision: 'deny', reason };
    throw error;
  }
}

/**
 * Per-resource check (seed, Authorization rules 4-5): load the resource first, then evaluate its rule.
 * A failed check answers exactly like a missing resource: 404 NOT_FOUND.
 */
export function checkResource(ex: Exchange, deps: PipelineDeps): StageResult {
  const target = ex.access.resource;
  if (!target) return;
  const id = ex.resourceId;
  if (id === undefined) return admitResource(ex, null, false);
  const loaded = loadResource(deps.operations, target.type, id);
  return loaded instanceof Promise ? loaded.then((resource) => decideResource(ex, deps, resource)) : decideResource(ex, deps, loaded);
}

function decideResource(ex: Exchange, deps: PipelineDeps, resource: ResourceRow | null): StageResult {
  const target = ex.access.resource!;
  if (resource === null) return admitResource(ex, null, false);
  const allowed = evaluateRule(deps.policy, target.type, target.action, ex.principal, resource, resourceLoader(deps.operations));
  return allowed instanceof Promise ? allowed.then((ok) => admitResource(ex, resource, ok)) : admitResource(ex, resource, allowed);
}

function admitResource(ex: Exchange, resource: ResourceRow | null, allowed: boolean): void {
  if (!allowed) {
    ex.decision = { decision: 'deny', reason: 'resource' };
    throw new ApiError('NOT_FOUND');
  }
  ex.resource = resource;
  ex.decision = { decision: 'allow', reason: 'resource' };
}

/**
 * Property-level authorization (OWASP API3; policy.yaml `protectedFields`): an update of a resource the
 * caller may update must still not change a field only other roles may change (a member's own role, say).
 * `changes` is the request's body: the resource as the request would leave it, or with `mergePatch` an RFC
 * 7396 patch of it. A refusal is the role's (403 FORBIDDEN naming the fields), recorded as such; it comes
 * after the per-resource check, so a resource the caller may not see is still 404 whatever the body.
 */
export function checkProtectedFields(ex: Exchange, deps: PipelineDeps, changes: unknown, mergePatch: boolean): void {
  const target = ex.access.resource;
  if (target?.action !== 'update' || ex.resource === null || changes === null || typeof changes !== 'object') return;
  const protectedFields = deps.policy.resources[target.type]?.protectedFields;
  if (protectedFields === undefined || Object.keys(protectedFields).length === 0) return;
  const current = deps.operations.resources.get(target.type).viewOf(ex.resource) as Record<string, unknown>;
  const next = (mergePatch ? applyMergePatch(current, changes) : changes) as Record<string, unknown>;
  const refused = forbiddenFieldChanges(deps.policy, target.type, ex.principal, current, next);
  if (refused.length === 0) return;
  ex.decision = { decision: 'deny', reason: 'role' };
  throw new ApiError('FORBIDDEN', `Your role may not change ${refused.join(', ')}.`);
}
