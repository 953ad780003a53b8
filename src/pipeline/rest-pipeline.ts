import type { Exchange } from './exchange.js';
import { rejectInvalidText } from './text-integrity.js';
import {
  authorizeOperation,
  checkPrecondition,
  checkResource,
  identify,
  limit,
  limitAddress,
  negotiate,
  rejectBodyToken,
  validate,
  type StageDeps,
} from './stages.js';

export type Phase = 'request' | 'body';

/** A stage returns nothing when it finished synchronously, or a promise when it had to wait (I/O). */
export type StageResult = void | Promise<void>;

export interface Stage {
  name: string;
  /** request: before the body is read; body: once it is parsed. */
  phase: Phase;
  run: (ex: Exchange, deps: StageDeps) => StageResult;
}

/**
 * The REST request pipeline, in order. The adapter (src/rest/) runs the `request` phase as soon as the
 * route is known, so a caller who may not call the operation is refused before its body is read, and the
 * `body` phase once the body is parsed; then the operation's handler runs, the response is serialised with
 * the contract's schema and tagged (rest/representation.ts), and the decision goes to the audit log
 * (record-decision.ts).
 *
 *   limit-address -> authenticate -> rate-limit -> negotiate -> authorize -> (parse) -> reject-body-token
 *   -> reject-invalid-text -> validate -> load-resource -> check-precondition
 *   -> handle -> serialize -> audit
 */
export const REST_PIPELINE: readonly Stage[] = [
  { name: 'limit-address', phase: 'request', run: limitAddress },
  { name: 'authenticate', phase: 'request', run: identify },
  { name: 'rate-limit', phase: 'request', run: limit },
  { name: 'negotiate', phase: 'request', run: negotiate },
  { name: 'authorize', phase: 'request', run: authorizeOperation },
  { name: 'reject-body-token', phase: 'body', run: rejectBodyToken },
  { name: 'reject-invalid-text', phase: 'body', run: rejectInvalidText },
  { name: 'validate', phase: 'body', run: validate },
  { name: 'load-resource', phase: 'body', run: checkResource },
  { name: 'check-precondition', phase: 'body', run: checkPrecondition },
];

const PHASES: Record<Phase, readonly Stage[]> = {
  request: REST_PIPELINE.filter((stage) => stage.phase === 'request'),
  body: REST_PIPELINE.filter((stage) => stage.phase === 'body'),
};

/**
 * Runs a phase's stages in order. It stays synchronous for as long as every stage does (a cached token,
 * a policy check): a request that waits for nothing is not charged a promise per stage.
 */
export function runPhase(phase: Phase, ex: Exchange, deps: StageDeps): StageResult {
  return runFrom(PHASES[phase], 0, ex, deps);
}

function runFrom(stages: readonly Stage[], first: number, ex: Exchange, deps: StageDeps): StageResult {
  for (let i = first; i < stages.length; i++) {
    const pending = stages[i]!.run(ex, deps);
    if (pending !== undefined) return pending.then(() => runFrom(stages, i + 1, ex, deps));
  }
}
