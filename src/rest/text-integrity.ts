import { pointerToken } from '../errors/json-pointer.js';
import { ApiError } from '../errors/registry.js';
import type { RestExchange } from './rest-exchange.js';

// NUL cannot be stored in PostgreSQL text, and an unpaired surrogate is not Unicode text at all: both would
// be stored as something other than what was sent, so they are refused rather than altered. GraphQL
// arguments and OAuth parameters are held to the same rule.
const INVALID_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether one string has a NUL character or an unpaired surrogate in it. */
export function containsInvalidText(value: string): boolean {
  return INVALID_TEXT.test(value);
}

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

/**
 * The JSON pointer, under `base`, of the first string or key in `value` that has a NUL character or an
 * unpaired surrogate in it; null when every string and key is valid text.
 */
export function findInvalidText(value: unknown, base: string): string | null {
  const keys = findInvalid(value);
  return keys === null ? null : base + keys.reverse().map((key) => `/${pointerToken(key)}`).join('');
}

/** The refusal of text that is not valid Unicode at `path`: the same code, message and detail from every API. */
export function invalidTextError(path: string): ApiError {
  return new ApiError('VALIDATION_FAILED', 'The request contains text that is not valid Unicode.', {
    details: [{ path, message: 'contains a NUL character or an unpaired surrogate' }],
  });
}

/** Refuses strings with NUL or unpaired surrogates anywhere in the query, path or body. */
export function rejectInvalidText(ex: RestExchange): void {
  const path = findInvalidText(ex.query, '/query') ?? invalidPathParameter(ex.params) ?? findInvalidText(ex.body, '/body');
  if (path !== null) throw invalidTextError(path);
}

/** Path parameters are named by the route (only their values come from the caller): the first invalid value's pointer. */
function invalidPathParameter(params: Record<string, string>): string | null {
  for (const name in params) {
    if (INVALID_TEXT.test(params[name]!)) return `/path/${pointerToken(name)}`;
  }
  return null;
}
