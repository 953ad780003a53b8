import { ApiError } from '../errors/registry.js';

/**
 * A write found the resource changed since this request read it (another request wrote in between): it is
 * refused rather than writing back the fields it read, which would undo the other write. The caller reads
 * the resource again (its new ETag) and retries.
 */
export function changedMeanwhile(): ApiError {
  return new ApiError('PRECONDITION_FAILED', 'The resource changed while this request was processed; read it again and retry.');
}
