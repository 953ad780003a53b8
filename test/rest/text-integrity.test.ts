import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors/registry.js';
import type { RestExchange } from '../../src/rest/rest-exchange.js';
import { containsInvalidText, findInvalidText, invalidTextError, rejectInvalidText } from '../../src/rest/text-integrity.js';

function refusal(parts: { query?: unknown; params?: unknown; body?: unknown }): unknown {
  try {
    rejectInvalidText({ query: {}, params: {}, body: undefined, ...parts } as unknown as RestExchange);
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return (error as ApiError).details;
  }
}

describe('rejectInvalidText: NUL and unpaired surrogates anywhere in the request', () => {
  it('names the JSON pointer of a nested value, keys escaped', () => {
    expect(refusal({ body: { a: { 'b/c~': ['ok', 'x\u0000'] } } })).toEqual([
      { path: '/body/a/b~1c~0/1', message: 'contains a NUL character or an unpaired surrogate' },
    ]);
  });

  it('names a key that is not valid text', () => {
    expect(refusal({ body: { list: [{ ['k\ud800']: 1 }] } })).toEqual([
      { path: '/body/list/0/k\ud800', message: 'contains a NUL character or an unpaired surrogate' },
    ]);
  });

  it('checks the query and the path parameters first', () => {
    expect(refusal({ query: { q: '\udc00' }, body: { title: '\u0000' } })).toEqual([
      { path: '/query/q', message: 'contains a NUL character or an unpaired surrogate' },
    ]);
    expect(refusal({ params: { postId: 'a\u0000' } })).toEqual([{ path: '/path/postId', message: 'contains a NUL character or an unpaired surrogate' }]);
  });

  it('accepts valid text, paired surrogates included', () => {
    expect(refusal({ query: { q: 'caf\u00e9' }, body: { title: '\ud83d\ude00', nested: [{ ok: true, n: 1, none: null }] } })).toBeNull();
  });

  it('finds an invalid string at the bottom of a deep document in one pass', () => {
    let body: unknown = '\u0000';
    for (let i = 0; i < 30; i++) body = { a: 'fine', b: body };
    // One pass over 61 values; a search repeated at each level on the way back would take 2^30 steps and
    // never finish.
    expect(refusal({ body })).toEqual([{ path: `/body${'/b'.repeat(30)}`, message: 'contains a NUL character or an unpaired surrogate' }]);
  });
});

describe('the same rule for the other interfaces (GraphQL arguments, OAuth parameters)', () => {
  it('tells whether one string has a NUL or an unpaired surrogate', () => {
    expect(['a\u0000', '\ud800', 'x\udc00', '\udc00\ud800'].map(containsInvalidText)).toEqual([true, true, true, true]);
    expect(['', 'caf\u00e9', '\ud83d\ude00', '\ufffd'].map(containsInvalidText)).toEqual([false, false, false, false]);
  });

  it('points into any value under the base it is given, and gives REST\'s refusal for that pointer', () => {
    expect(findInvalidText({ id: 'ok', input: { title: 'x\u0000' } }, '')).toBe('/input/title');
    expect(findInvalidText({ id: 'ok', input: { title: 'x' } }, '')).toBeNull();
    const error = invalidTextError('/input/title');
    expect({ code: error.code, status: error.status, message: error.message, details: error.details }).toEqual({
      code: 'VALIDATION_FAILED',
      status: 400,
      message: 'The request contains text that is not valid Unicode.',
      details: [{ path: '/input/title', message: 'contains a NUL character or an unpaired surrogate' }],
    });
  });
});
