import { describe, expect, it } from 'vitest';
import { routes } from '../../generated/routes.js';
import { partValidator, plainAcceptor, type RequestPart } from '../../src/rest/validation.js';

// Strings near every bound and pattern of the contract's parameters, and values that are not strings.
const STRINGS = [
  '', 'a', 'abc', 'A'.repeat(64), 'A'.repeat(65), 'a'.repeat(128), 'a'.repeat(129), 'a'.repeat(512), 'a'.repeat(513), 'é', 'x y', 'a.b~c',
  '😀'.repeat(32), '😀'.repeat(33), `${'😀'.repeat(31)}a`, '"abc"', 'W/"x"', '"a", W/"b"', '*', 'author', 'post', 'admin', 'member', 'draft',
  'published', 'allow', 'deny', '10', '0x10', '-1', '1.5', 'true', ' ', '\u0000', '\ud800', '2026-01-01T00:00:00Z', 'not-a-date', `"${'a'.repeat(1030)}"`,
];
const OTHERS: unknown[] = [5, 0, true, null, ['author'], ['author', 'author'], ['a', 'b'], {}];
const VALUES: unknown[] = [...STRINGS, ...OTHERS];

/** A small deterministic generator, so that a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

function inputsFor(schema: { properties?: Record<string, unknown> }): Record<string, unknown>[] {
  const names = Object.keys(schema.properties ?? {});
  const inputs: Record<string, unknown>[] = [{}, { unknown: 'x' }];
  for (const name of names) for (const value of VALUES) inputs.push({ [name]: value });
  const next = random(names.length + 7);
  for (let i = 0; i < 300 && names.length > 1; i++) {
    const input: Record<string, unknown> = {};
    for (const name of names) if (next() < 0.6) input[name] = VALUES[Math.floor(next() * VALUES.length)];
    inputs.push(input);
  }
  return inputs;
}

const PARTS: RequestPart[] = ['params', 'querystring', 'headers'];
const schemas = routes.flatMap((route) =>
  PARTS.flatMap((part) => {
    const schema = route.schema[part as keyof typeof route.schema] as object | undefined;
    return schema ? [{ name: `${route.operationId} ${part}`, part, schema }] : [];
  }),
);

describe('the quick acceptance of parameters', () => {
  it.each(schemas)('accepts only what Ajv accepts unchanged: $name', ({ part, schema }) => {
    const accept = plainAcceptor(schema);
    expect(accept).not.toBeNull();
    const validate = partValidator(schema, part);
    let accepted = 0;
    for (const input of inputsFor(schema as { properties?: Record<string, unknown> })) {
      const quick = structuredClone(input);
      const full = structuredClone(input);
      const valid = validate(full);
      if (accept!(quick)) {
        accepted++;
        // Accepted here means valid for Ajv, with the same data afterwards (defaults filled in alike).
        expect({ input, valid }).toEqual({ input, valid: true });
        expect(quick).toEqual(full);
      }
    }
    expect(accepted).toBeGreaterThan(0);
  });

  it('accepts the usual request without Ajv, and leaves numbers, lists and formats to it', () => {
    const getPost = routes.find((route) => route.operationId === 'getPost')!;
    const listPosts = routes.find((route) => route.operationId === 'listPosts')!;
    expect(plainAcceptor(getPost.schema.params!)!({ postId: 'p_01HZX3' })).toBe(true);
    expect(plainAcceptor(getPost.schema.headers!)!({ host: '127.0.0.1', authorization: 'Bearer x', accept: 'application/json' })).toBe(true);
    const query: Record<string, unknown> = {};
    expect(plainAcceptor(listPosts.schema.querystring!)!(query)).toBe(true);
    expect(query).toEqual({ limit: 20, page: 1 });
    // A query number is coerced and a single expand becomes a list: Ajv's to do.
    expect(plainAcceptor(listPosts.schema.querystring!)!({ limit: '5' })).toBe(false);
    expect(plainAcceptor(getPost.schema.querystring!)!({ expand: 'author' })).toBe(false);
    // Near a length bound counted in code points, and any format, too.
    expect(plainAcceptor(getPost.schema.params!)!({ postId: 'A'.repeat(65) })).toBe(false);
    expect(plainAcceptor({ type: 'object', properties: { since: { type: 'string', format: 'date-time' } } })!({ since: '2026-01-01T00:00:00Z' })).toBe(false);
    expect(plainAcceptor({ type: 'object', properties: { a: { type: 'string' } }, anyOf: [] })).toBeNull();
  });

  it('fills in a default only when Ajv takes it as it is, and leaves an absent parameter with any other default to Ajv', () => {
    const withDefault = (property: object) => plainAcceptor({ type: 'object', properties: { p: property }, additionalProperties: false })!;
    for (const property of [
      { type: 'string', pattern: '^[a-z]+$', default: 'Bad!' },
      { type: 'string', enum: ['asc', 'desc'], default: 'random' },
      { type: 'string', maxLength: 2, default: 'abcdef' },
      { type: 'integer', minimum: 1, default: 0 },
      { type: 'boolean', default: 'yes' },
      // Ajv would fill these in coerced (20, "5"): not as they are.
      { type: 'integer', default: '20' },
      { type: 'string', default: 5 },
    ]) {
      const data = {};
      expect({ property, accepted: withDefault(property)(data), data }).toEqual({ property, accepted: false, data: {} });
    }
    const data = {};
    expect(withDefault({ type: 'integer', minimum: 1, default: 20 })(data)).toBe(true);
    expect(data).toEqual({ p: 20 });
  });
});
