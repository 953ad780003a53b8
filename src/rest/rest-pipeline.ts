import { runStages, type Stage, type StageResult } from '../pipeline/pipeline.js';
import { authorizeOperation, checkProtectedFields, checkResource, identify, limit, limitAddress } from '../pipeline/stages.js';
import type { RestExchange } from './rest-exchange.js';
import { checkBodyType, checkPrecondition, negotiate, rejectBodyToken, validate, type RestStageDeps } from './rest-stages.js';
import { rejectInvalidText } from './text-integrity.js';

export type Phase = 'request' | 'body';

export interface RestStage extends Stage<RestExchange, RestStageDeps> {
  /** request: before the body is read; body: once it is parsed. */
  phase: Phase;
}

/**
 * The REST request pipeline, in order: the pipeline's access stages (src/pipeline/pipeline.ts, the same
 * functions in the same order for every API) with REST's own stages in between. The adapter (plugin.ts)
 * runs the `request` phase as soon as the route is known, so a caller who may not call the operation is
 * refused before its body is read, and the `body` phase once the body is parsed; then the operation's
 * handler runs, the response is serialised with the contract's schema and tagged (representation.ts), and
 * the decision goes to the audit log (src/pipeline/record-decision.ts).
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
  { name: 'reject-body-token', phase: 'body', run: rejectBodyToken },
  { name: 'reject-invalid-text', phase: 'body', run: rejectInvalidText },
  { name: 'check-body-type', phase: 'body', run: checkBodyType },
  { name: 'validate', phase: 'body', run: validate },
  { name: 'load-resource', phase: 'body', run: checkResource },
  { name: 'check-protected-fields', phase: 'body', run: (ex, deps) => checkProtectedFields(ex, deps, ex.body, ex.method === 'PATCH') },
  { name: 'check-precondition', phase: 'body', run: checkPrecondition },
];

const PHASES: Record<Phase, readonly RestStage[]> = {
  request: REST_PIPELINE.filter((stage) => stage.phase === 'request'),
  body: REST_PIPELINE.filter((stage) => stage.phase === 'body'),
};

/** Runs a phase's stages in order, synchronously while every stage finishes at once. */
export function runPhase(phase: Phase, ex: RestExchange, deps: RestStageDeps): StageResult {
  return runStages(PHASES[phase], ex, deps);
}
