import type { Exchange } from './exchange.js';
import { authorizeOperation, checkResource, identify, limit, limitAddress, type PipelineDeps } from './stages.js';

/** A stage returns nothing when it finished synchronously, or a promise when it had to wait (I/O). */
export type StageResult = void | Promise<void>;

export interface Stage<E extends Exchange = Exchange, D extends PipelineDeps = PipelineDeps> {
  name: string;
  run: (ex: E, deps: D) => StageResult;
}

/**
 * The access decision every API makes, in order, whatever its transport:
 *
 *   limit-address -> authenticate -> rate-limit -> authorize -> load-resource -> (handle) -> audit
 *
 * Each adapter runs these stages, the same functions, in this order, with its own stages in between
 * (src/rest/rest-pipeline.ts: version negotiation, validation, preconditions), and where a body is at hand the
 * protected-fields check after load-resource (REST's body phase, GraphQL's root fields); then the operation, then the
 * decision goes to the audit log (record-decision.ts) once the request has been answered. A refusal throws
 * the registry's ApiError, and the exchange's `decision` says which check refused.
 */
export const ACCESS_PIPELINE: readonly Stage[] = [
  { name: 'limit-address', run: limitAddress },
  { name: 'authenticate', run: identify },
  { name: 'rate-limit', run: limit },
  { name: 'authorize', run: authorizeOperation },
  { name: 'load-resource', run: checkResource },
];

/**
 * Runs stages in order. It stays synchronous for as long as every stage does (a cached token, a policy
 * check): a request that waits for nothing is not charged a promise per stage.
 */
export function runStages<E extends Exchange, D extends PipelineDeps>(stages: readonly Stage<E, D>[], ex: E, deps: D): StageResult {
  return continueFrom(stages.map((stage) => stage.run), 0, ex, deps);
}

/**
 * The stages as one function of their own, which calls each in order exactly as `runStages` does: at once
 * while every stage returns nothing, from the next stage once one returns a promise and it resolves, and
 * no further once one throws or rejects; what it returns is nothing or a promise of nothing. Each list gets
 * its own compiled code, so that every call in it sees one stage only (which V8 may then inline), where
 * `runStages`'s one call site sees every stage of every list. The stages are taken as they are now, for
 * every later run, and the code is made from their positions alone: no name, text or value of a stage
 * becomes code.
 */
export function compileStages<E extends Exchange, D extends PipelineDeps>(stages: readonly Stage<E, D>[]): (ex: E, deps: D) => StageResult {
  const runs = Object.freeze(stages.map((stage) => stage.run));
  const names = runs.map((_, i) => `stage${i}`);
  const calls = runs.map(
    (_, i) => `pending = stage${i}(ex, deps);\n  if (pending !== undefined) return pending.then(() => continueFrom(runs, ${i + 1}, ex, deps));`,
  );
  const source = `return function runCompiledStages(ex, deps) {\n  let pending;\n  ${calls.join('\n  ')}\n};`;
  const make = new Function(...names, 'runs', 'continueFrom', source) as (...args: unknown[]) => (ex: E, deps: D) => StageResult;
  return make(...runs, runs, continueFrom);
}

/** The stages' functions from `first` on, in order, synchronously until one has to wait. */
function continueFrom<E extends Exchange, D extends PipelineDeps>(runs: readonly Stage<E, D>['run'][], first: number, ex: E, deps: D): StageResult {
  for (let i = first; i < runs.length; i++) {
    const pending = runs[i]!(ex, deps);
    if (pending !== undefined) return pending.then(() => continueFrom(runs, i + 1, ex, deps));
  }
}
