import { pointerToken } from '../errors/json-pointer.js';
import { ApiError } from '../errors/registry.js';
import type { RestExchange } from './rest-exchange.js';

// NUL cannot be stored in PostgreSQL text, and an unpaired surrogate is not Unicode text at all: both would
// be stored as something other than what was sent, so they are refused rather than altered.
const INVALID_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Where the first invalid string or key is: [] for `value` itself, else the keys leading to it, innermost
 * first (the pointer is built only for a refusal); null when everything is valid text.
 */
function findInvalid(value: unknown, depth = 0): string[] | null {
  if (typeof value === 'string') return INVALID_TEXT.test(value) ? [] : null;
  if (depth > 32 || value === null || typeof value !== 'object') return null;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (INVALID_TEXT.test(key)) return [key];
    const found = findInvalid((value as Record<string, unknown>)[key], depth + 1);
    if (found !== null) {
      found.push(key);
      return found;
    }
  }
  return null;
}

function pointer(base: string, keys: string[] | null): string | null {
  return keys === null ? null : base + keys.reverse().map((key) => `/${pointerToken(key)}`).join('');
}

/** Refuses strings with NUL or unpaired surrogates anywhere in the query, path or body. */
export function rejectInvalidText(ex: RestExchange): void {
  const path = pointer('/query', findInvalid(ex.query)) ?? pointer('/path', findInvalid(ex.params)) ?? pointer('/body', findInvalid(ex.body));
  if (path !== null) {
    throw new ApiError('VALIDATION_FAILED', 'The request contains text that is not valid Unicode.', {
      details: [{ path, message: 'contains a NUL character or an unpaired surrogate' }],
    });
  }
}
