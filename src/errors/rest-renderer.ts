import { ApiError, ERROR_CODES, type ErrorCode } from './registry.js';

export interface RenderedError {
  status: number;
  headers: Record<string, string>;
  body: { error: { code: ErrorCode; message: string; details?: { path: string; message: string }[] } };
}

/** Anything that is not an ApiError becomes a generic INTERNAL (or UNAVAILABLE) with no internals. */
export function renderRestError(error: unknown): RenderedError {
  const api = toApiError(error);
  const body: RenderedError['body'] = { error: { code: api.code, message: api.message } };
  if (api.details && api.details.length > 0) body.error.details = api.details;
  return { status: api.status, headers: api.headers, body };
}

export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (isUnavailable(error)) return new ApiError('UNAVAILABLE');
  return new ApiError('INTERNAL', ERROR_CODES.INTERNAL.message, { cause: error });
}

const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'SQLITE_BUSY', '57P01', '57P03', '08006', '08001', '08003']);

/** A database or cache that cannot be reached is a 503, not a 500: the request may succeed later. */
export function isUnavailable(error: unknown): boolean {
  if (!error || typeof error !== 'object') return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
  const message = (error as { message?: unknown }).message;
  return typeof message === 'string' && /Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED/.test(message);
}
