import { ApiError } from '../errors/registry.js';
import type { PipelineDeps } from '../pipeline/stages.js';
import { bearerChallenge } from '../pipeline/www-authenticate.js';
import { matchesAny } from './entity-tag.js';
import type { RepresentationTagger } from './representation.js';
import type { RestExchange } from './rest-exchange.js';
import { requestValidator } from './validation.js';
import { negotiateVersion, VENDOR_TYPE } from './versioning.js';

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

export const MERGE_PATCH_TYPE = 'application/merge-patch+json';

/**
 * The body in the media type the operation takes: JSON (or this API's vendor JSON type) for POST and PUT,
 * a JSON merge patch (RFC 7396) for PATCH — the two mean different things, so neither stands in for the
 * other (415, naming the one to send).
 */
export function checkBodyType(ex: RestExchange): void {
  if (ex.body === undefined || ex.route.bodyMediaType === null) return;
  const sent = String(ex.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
  const accepted = ex.route.bodyMediaType === MERGE_PATCH_TYPE ? sent === MERGE_PATCH_TYPE : sent === 'application/json' || sent === VENDOR_TYPE;
  if (!accepted) throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `The request body must be ${ex.route.bodyMediaType}.`);
}

/** Parameters, body, query and headers against the contract (400 VALIDATION_FAILED, no mass assignment). */
export function validate(ex: RestExchange): void {
  requestValidator(ex.route)(ex.params, ex.body, ex.query, ex.headers);
}

/** RFC 9110 §13.1.1: a PUT, PATCH or DELETE with If-Match proceeds only when the current representation matches. */
export function checkPrecondition(ex: RestExchange, deps: RestStageDeps): void {
  const ifMatch = ex.headers['if-match'];
  if (ifMatch === undefined || !ex.resource || (ex.method !== 'PUT' && ex.method !== 'PATCH' && ex.method !== 'DELETE')) return;
  const current = deps.representations.current(ex.route, ex.resource);
  if (current === null || !matchesAny(ifMatch, current, false)) throw new ApiError('PRECONDITION_FAILED');
}
