import { pointerToken } from '../errors/json-pointer.js';
import { ApiError } from '../errors/registry.js';
import type { RestExchange } from './rest-exchange.js';

// NUL cannot be stored in PostgreSQL text, and an unpaired surrogate is not Unicode text at all: both would
// be stored as something other than what was sent, so they are refused rather than altered.
const INVALID_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function findInvalid(value: unknown, path: string, depth = 0): string | null {
  if (typeof value === 'string') return INVALID_TEXT.test(value) ? path : null;
  if (depth > 32 || value === null || typeof value !== 'object') return null;
  for (const [key, child] of Object.entries(value)) {
    const childPath = `${path}/${pointerToken(key)}`;
    if (INVALID_TEXT.test(key)) return childPath;
    const found = findInvalid(child, childPath, depth + 1);
    if (found !== null) return found;
  }
  return null;
}

/** Refuses strings with NUL or unpaired surrogates anywhere in the query, path or body. */
export function rejectInvalidText(ex: RestExchange): void {
  const path = findInvalid(ex.query, '/query') ?? findInvalid(ex.params, '/path') ?? findInvalid(ex.body, '/body');
  if (path !== null) {
    throw new ApiError('VALIDATION_FAILED', 'The request contains text that is not valid Unicode.', {
      details: [{ path, message: 'contains a NUL character or an unpaired surrogate' }],
    });
  }
}
