import { compileStages, type Stage, type StageResult } from '../pipeline/pipeline.js';
import { authorizeOperation, checkProtectedFields, checkResource, identify, limit, limitAddress } from '../pipeline/stages.js';
import type { RestExchange } from './rest-exchange.js';
import type { RouteDefinition } from './route-definition.js';
import { checkBodyType, checkPrecondition, negotiate, rejectBodyToken, validate, type RestStageDeps } from './rest-stages.js';
import { rejectInvalidText } from './text-integrity.js';

export type Phase = 'request' | 'body';

export interface RestStage extends Stage<RestExchange, RestStageDeps> {
  /** request: before the body is read; body: once it is parsed. */
  phase: Phase;
  /**
   * Whether the stage can do anything for a request of this route (absent: always): a stage that could only
   * ever return at once, whatever the request, is left out of the route's pipeline.
   */
  appliesTo?: (route: RouteDefinition) => boolean;
}

/** Methods whose body Fastify reads and hands to the pipeline (a GET's it never reads). */
const takesBody = (route: RouteDefinition) => route.method !== 'GET';

/**
 * The REST request pipeline, in order: the pipeline's access stages (src/pipeline/pipeline.ts, the same
 * functions in the same order for every API) with REST's own stages in between. The adapter (plugin.ts)
 * runs the `request` phase as soon as the route is known, so a caller who may not call the operation is
 * refused before its body is read (and before its handler runs), and the `body` phase once the body is
 * parsed; then the operation's handler runs, the response is serialised with the
 * contract's schema and tagged (representation.ts), and the decision goes to the audit log
 * (src/pipeline/record-decision.ts). Each route runs the stages that apply to it, compiled into one function
 * per phase (`phaseRunners`).
 *
 *   limit-address -> authenticate -> rate-limit -> negotiate -> authorize -> (parse) -> reject-body-token
 *   -> reject-invalid-text -> check-body-type -> validate -> load-resource -> check-protected-fields
 *   -> check-precondition -> handle -> serialize -> audit
 */
export const REST_PIPELINE: readonly RestStage[] = [
  { name: 'limit-address', phase: 'request', run: limitAddress },
  { name: 'authenticate', phase: 'request', run: identify },
  { name: 'rate-limit', phase: 'request', run: limit },
  { name: 'negotiate', phase: 'request', run: negotiate },
  { name: 'authorize', phase: 'request', run: authorizeOperation },
  { name: 'reject-body-token', phase: 'body', run: rejectBodyToken, appliesTo: takesBody },
  { name: 'reject-invalid-text', phase: 'body', run: rejectInvalidText },
  { name: 'check-body-type', phase: 'body', run: checkBodyType, appliesTo: (route) => route.bodyMediaType !== null },
  { name: 'validate', phase: 'body', run: validate },
  { name: 'load-resource', phase: 'body', run: checkResource, appliesTo: (route) => Boolean(route.access.resource) },
  {
    name: 'check-protected-fields',
    phase: 'body',
    run: (ex, deps) => checkProtectedFields(ex, deps, ex.body, ex.method === 'PATCH'),
    appliesTo: (route) => route.access.resource?.action === 'update',
  },
  { name: 'check-precondition', phase: 'body', run: checkPrecondition, appliesTo: (route) => ['PUT', 'PATCH', 'DELETE'].includes(route.method) },
];

/** A route's two phases, each its stages that apply to it, in order, run synchronously while every stage finishes at once. */
export type PhaseRunners = Record<Phase, (ex: RestExchange, deps: RestStageDeps) => StageResult>;

export function phaseRunners(route: RouteDefinition): PhaseRunners {
  return { request: compileStages(stagesFor(route, 'request')), body: compileStages(stagesFor(route, 'body')) };
}

/** The stages of a phase that apply to the route, in the pipeline's order. */
export function stagesFor(route: RouteDefinition, phase: Phase): RestStage[] {
  return REST_PIPELINE.filter((stage) => stage.phase === phase && (stage.appliesTo?.(route) ?? true));
}
