import type { Exchange } from './exchange.js';
import { rejectInvalidText } from './text-integrity.js';
import { authorizeOperation, checkResource, identify, limit, negotiate, rejectBodyToken, type StageDeps } from './stages.js';

export type Phase = 'request' | 'body' | 'resource';

export interface Stage {
  name: string;
  /** request: before the body is read; body: after parsing, before validation; resource: after validation. */
  phase: Phase;
  run: (ex: Exchange, deps: StageDeps) => void | Promise<void>;
}

/**
 * The REST request pipeline, in order. The adapter (src/rest/) runs each phase's stages in this order;
 * Fastify validates the request against the contract between `body` and `resource`; the handler runs
 * after `resource`; the response is serialised with the contract's schema and tagged (ETag); the audit
 * log records the decision when the response is sent.
 *
 *   authenticate -> rate-limit -> negotiate -> authorize -> (parse) -> reject-body-token
 *   -> reject-invalid-text -> validate
 *   -> load-resource -> handle -> serialize (rest/representation.ts) -> audit (record-decision.ts)
 */
export const REST_PIPELINE: readonly Stage[] = [
  { name: 'authenticate', phase: 'request', run: identify },
  { name: 'rate-limit', phase: 'request', run: limit },
  { name: 'negotiate', phase: 'request', run: negotiate },
  { name: 'authorize', phase: 'request', run: authorizeOperation },
  { name: 'reject-body-token', phase: 'body', run: rejectBodyToken },
  { name: 'reject-invalid-text', phase: 'body', run: rejectInvalidText },
  { name: 'load-resource', phase: 'resource', run: checkResource },
];

export async function runPhase(phase: Phase, ex: Exchange, deps: StageDeps): Promise<void> {
  for (const stage of REST_PIPELINE) {
    if (stage.phase === phase) await stage.run(ex, deps);
  }
}
