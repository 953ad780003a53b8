import { ApiError } from '../errors/registry.js';
import type { PipelineDeps } from '../pipeline/stages.js';
import { bearerChallenge } from '../pipeline/www-authenticate.js';
import { matchesAny } from './entity-tag.js';
import type { RepresentationTagger } from './representation.js';
import type { RestExchange } from './rest-exchange.js';
import { requestValidator } from './validation.js';
import { negotiateVersion } from './versioning.js';

export interface RestStageDeps extends PipelineDeps {
  /** The ETags GETs would carry: of a resource now (If-Match), of what a write returned. */
  representations: RepresentationTagger;
}

/** API version from the path or the Accept header (406 when unknown). */
export function negotiate(ex: RestExchange): void {
  ex.mediaType = negotiateVersion(ex.headers.accept, ex.pathVersioned);
}

/** RFC 6750 §2.2 allows a token in a form body; this API takes it only in the header. */
export function rejectBodyToken(ex: RestExchange): void {
  if (ex.body && typeof ex.body === 'object' && !Array.isArray(ex.body) && Object.hasOwn(ex.body, 'access_token')) {
    ex.decision = { decision: 'deny', reason: 'authentication' };
    throw new ApiError('VALIDATION_FAILED', 'Send the access token in the Authorization header, not in the body.', {
      headers: { 'www-authenticate': bearerChallenge('invalid_request') },
      details: [{ path: '/body/access_token', message: 'tokens are accepted only in the Authorization header' }],
    });
  }
}

/** Parameters, body, query and headers against the contract (400 VALIDATION_FAILED, no mass assignment). */
export function validate(ex: RestExchange): void {
  requestValidator(ex.route)({ params: ex.params, body: ex.body, querystring: ex.query, headers: ex.headers });
}

/** RFC 9110 §13.1.1: a PUT or DELETE with If-Match proceeds only when the current representation matches. */
export function checkPrecondition(ex: RestExchange, deps: RestStageDeps): void {
  const ifMatch = ex.headers['if-match'];
  if (ifMatch === undefined || !ex.resource || (ex.method !== 'PUT' && ex.method !== 'DELETE')) return;
  const current = deps.representations.current(ex.route, ex.resource);
  if (current === null || !matchesAny(ifMatch, current, false)) throw new ApiError('PRECONDITION_FAILED');
}
