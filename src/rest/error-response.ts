import type { FastifyError } from 'fastify';
import { ApiError } from '../errors/registry.js';
import { validationDetails } from './validation.js';

/** Fastify's own errors (parsing, limits, validation) mapped onto the error registry. */
export function fromFastifyError(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  const e = error as FastifyError & { validation?: unknown[]; validationContext?: string };
  if (Array.isArray(e.validation)) {
    return new ApiError('VALIDATION_FAILED', 'The request does not match the contract.', {
      details: validationDetails(e.validation as never, e.validationContext),
    });
  }
  switch (e.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('UNSUPPORTED_MEDIA_TYPE');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('PAYLOAD_TOO_LARGE');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('VALIDATION_FAILED', 'The JSON body is empty.');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('VALIDATION_FAILED', 'The Content-Length does not match the body.');
  }
  if (e instanceof SyntaxError || (e.statusCode === 400 && /JSON/i.test(e.message ?? ''))) {
    return new ApiError('VALIDATION_FAILED', 'The body is not valid JSON.');
  }
  if (e.statusCode === 400) return new ApiError('VALIDATION_FAILED');
  return error;
}
