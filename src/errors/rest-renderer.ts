import { ApiError, ERROR_CODES, type ErrorCode } from './registry.js';
import { isBusy } from '../storage/sqlite-write-lock.js';

export interface RenderedError {
  status: number;
  headers: Record<string, string>;
  body: { error: { code: ErrorCode; message: string; details?: { path: string; message: string }[] } };
}

/** Anything that is not an ApiError becomes a generic INTERNAL (or UNAVAILABLE) with no internals. */
export function renderRestError(error: unknown): RenderedError {
  const api = toApiError(error);
  const body: RenderedError['body'] = { error: { code: api.code, message: printable(api.message) } };
  if (api.details && api.details.length > 0) {
    body.error.details = api.details.slice(0, MAX_DETAILS).map((d) => ({ path: printable(d.path), message: printable(d.message) }));
  }
  return { status: api.status, headers: api.headers, body };
}

// The contract's Error schema: at most 100 details; texts of at most 1000 characters without control characters.
const MAX_DETAILS = 100;
const MAX_TEXT = 1000;

/**
 * Detail paths can carry client text (a property name), so control characters are shown escaped (`\u0000`)
 * and over-long text is cut, keeping every error body within the contract.
 */
function printable(text: string): string {
  const escaped = text.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  const chars = [...escaped];
  return chars.length <= MAX_TEXT ? escaped : `${chars.slice(0, MAX_TEXT - 1).join('')}\u2026`;
}

export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (isUnavailable(error)) return new ApiError('UNAVAILABLE');
  return new ApiError('INTERNAL', ERROR_CODES.INTERNAL.message, { cause: error });
}

/**
 * A 503 the server decided on itself (shutting down, the audit log full): its condition is logged where it
 * begins, not once per refused request.
 */
export function isRefusal(error: unknown): boolean {
  return error instanceof ApiError && error.code === 'UNAVAILABLE' && error.cause === undefined;
}

// PostgreSQL SQLSTATEs: 08xxx connection exceptions, 57P01-57P03 server shutting down or starting, 53300 too many
// connections, 3D000 the configured database does not exist (dropped or not yet created): none is the request's fault.
// PORTCULLIS_BATCH_COMMIT_FAILED: a commit shared by the requests of one turn failed (storage/turn-batch.ts);
// none of them is at fault, and each may succeed when retried.
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND',
  '57P01', '57P02', '57P03', '53300', '3D000', '08006', '08001', '08003',
  'PORTCULLIS_BATCH_COMMIT_FAILED',
]);

/** A database or cache that cannot be reached is a 503, not a 500: the request may succeed later. */
export function isUnavailable(error: unknown): boolean {
  if (!error || typeof error !== 'object') return false;
  const code = (error as { code?: unknown }).code;
  // SQLITE_BUSY and its extended codes: another connection held a lock for longer than a request waits.
  if ((typeof code === 'string' && UNAVAILABLE_CODES.has(code)) || isBusy(error)) return true;
  // 55000 is other states' code too: only a database closed to connections (ALLOW_CONNECTIONS false), told by
  // the server's routine, which unlike the message is not translated.
  if (code === '55000' && (error as { routine?: unknown }).routine === 'CheckMyDatabase') return true;
  const message = (error as { message?: unknown }).message;
  return typeof message === 'string' && /Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED/.test(message);
}
