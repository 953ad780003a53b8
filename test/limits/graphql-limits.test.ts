import { buildSchema, getIntrospectionQuery, GraphQLError, parse, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import {
  checkBatchSize,
  checkDocumentLimits,
  INTROSPECTION_MAX_DEPTH,
  LimitExceededError,
  MAX_PAGE_SIZE,
  parseWithinLimits,
  type GraphqlLimits,
} from '../../src/limits/graphql-limits.js';

const schema = buildSchema(`
  type User { id: ID! name: String! posts(first: Int, after: String): PostConnection! best: Post }
  type Post { id: ID! title: String! author: User comments(first: Int): CommentConnection! }
  type Comment { id: ID! body: String! author: User }
  type PostConnection { nodes: [Post!]! }
  type CommentConnection { nodes: [Comment!]! }
  type Query { me: User post(id: ID!): Post posts(first: Int, after: String): PostConnection! }
  type Mutation { renamePost(id: ID!, title: String!): Post }
  type Subscription { postPublished: Post! }
`);

const LIMITS: GraphqlLimits = { maxDepth: 6, maxCost: 1000, maxAliases: 5, maxTokens: 400, maxDirectivesPerField: 2, maxBatch: 1 };

/** Parses and measures as the server does, before validation; returns the refusal, or null for a document that then validates. */
function measure(query: string, variables: Record<string, unknown> = {}, operationName?: string, limits = LIMITS): LimitExceededError | null {
  try {
    const document = parseWithinLimits(query, limits);
    checkDocumentLimits(schema, document, operationName, variables, limits);
    expect(validate(schema, document)).toEqual([]);
    return null;
  } catch (error) {
    if (error instanceof LimitExceededError) return error;
    throw error;
  }
}

function refusal(error: LimitExceededError | null): { code: string; message: string } | null {
  return error && { code: error.code, message: error.message };
}

/** `{ me { best { author { best ... { id } } } } }`: `levels` fields in a row, the last one `id`. */
function nested(levels: number): string {
  const chain = Array.from({ length: levels - 1 }, (_, level) => (level === 0 ? 'me' : level % 2 === 1 ? 'best' : 'author'));
  return `{ ${chain.map((field) => `${field} { `).join('')}id${' }'.repeat(levels - 1)} }`;
}

describe('GraphQL document limits', () => {
  describe('depth', () => {
    it('accepts a query at the maximum and refuses one a level deeper, naming the limit', () => {
      expect(measure(nested(6))).toBeNull();
      expect(refusal(measure(nested(7)))).toEqual({ code: 'QUERY_TOO_DEEP', message: 'Depth limit: the query is 7 levels deep, at most 6 are allowed.' });
    });

    it('counts named fragments where they are spread, and inline fragments', () => {
      const viaFragments = `
        query { me { ...A } }
        fragment A on User { best { ...B } }
        fragment B on Post { author { ... on User { best { author { best { id } } } } } }`;
      expect(refusal(measure(viaFragments))?.code).toBe('QUERY_TOO_DEEP');
      expect(measure('query { me { ...A } } fragment A on User { best { author { id } } }')).toBeNull();
    });

    it('applies to mutations and subscriptions too', () => {
      expect(refusal(measure('mutation { renamePost(id: "1", title: "t") { author { best { author { best { author { id } } } } } } }'))?.code).toBe('QUERY_TOO_DEEP');
      expect(refusal(measure('subscription { postPublished { author { best { author { best { author { id } } } } } } }'))?.code).toBe('QUERY_TOO_DEEP');
    });

    it('measures only the operation the request runs', () => {
      const document = `query Shallow { me { id } } query Deep ${nested(7)}`;
      expect(measure(document, {}, 'Shallow')).toBeNull();
      expect(refusal(measure(document, {}, 'Deep'))?.code).toBe('QUERY_TOO_DEEP');
    });

    it('lets the standard introspection query through, and refuses introspection nested deeper than its own maximum', () => {
      expect(measure(getIntrospectionQuery(), {}, undefined, { ...LIMITS, maxTokens: 10_000, maxAliases: 5 })).toBeNull();
      let typeRef = 'name';
      for (let level = 0; level < INTROSPECTION_MAX_DEPTH; level++) typeRef = `ofType { ${typeRef} }`;
      expect(refusal(measure(`{ __type(name: "User") { ${typeRef} } }`, {}, undefined, { ...LIMITS, maxTokens: 10_000 }))).toEqual({
        code: 'QUERY_TOO_DEEP',
        message: `Depth limit: the introspection query is ${INTROSPECTION_MAX_DEPTH + 2} levels deep, at most ${INTROSPECTION_MAX_DEPTH} are allowed.`,
      });
    });
  });

  describe('cost', () => {
    it('multiplies a connection\'s selection by its first, from a literal', () => {
      // 1 (posts) + 100 x (1 nodes + 1 id + 1 title + (1 author + 1 name)) = 501
      expect(measure('{ posts(first: 100) { nodes { id title author { name } } } }')).toBeNull();
      const nestedConnections = '{ posts(first: 10) { nodes { comments(first: 100) { nodes { id } } } } }';
      expect(refusal(measure(nestedConnections))).toEqual({
        code: 'QUERY_TOO_COMPLEX',
        message: "Cost limit: the query costs more than 1000 points (each field 1, a connection's fields times its `first`).",
      });
    });

    it('takes first from variables, and from a variable\'s default', () => {
      const query = 'query ($n: Int) { posts(first: $n) { nodes { comments(first: $n) { nodes { id } } } } }';
      expect(measure(query, { n: 10 })).toBeNull();
      expect(refusal(measure(query, { n: 40 }))?.code).toBe('QUERY_TOO_COMPLEX');
      expect(refusal(measure('query ($n: Int = 40) { posts(first: $n) { nodes { comments(first: $n) { nodes { id } } } } }'))?.code).toBe('QUERY_TOO_COMPLEX');
    });

    it('counts a fragment at every spread, measuring it once', () => {
      const spreads = Array.from({ length: 5 }, () => '...P').join(' ');
      expect(refusal(measure(`{ posts(first: 50) { nodes { ${spreads} } } } fragment P on Post { id title author { name } }`))?.code).toBe('QUERY_TOO_COMPLEX');
    });

    it('measures a fragment bomb in time linear in the document, and refuses it', () => {
      // Each fragment spreads the previous one twice: 2^40 copies of `id title` once expanded.
      let fragments = 'fragment F0 on Post { id title }';
      for (let level = 1; level <= 40; level++) fragments += ` fragment F${level} on Post { ...F${level - 1} ...F${level - 1} }`;
      const bomb = `{ post(id: "1") { ...F40 } } ${fragments}`;
      const roomy = { ...LIMITS, maxTokens: 10_000 };
      expect(refusal(measure(bomb, {}, undefined, roomy))?.code).toBe('QUERY_TOO_COMPLEX');
      // With no cost limit to stop early, the whole expansion is measured: once per fragment, or it would
      // never finish (a bound on the work, not a timing assertion on speed).
      const document = parseWithinLimits(bomb, roomy);
      const started = process.hrtime.bigint();
      expect(() => checkDocumentLimits(schema, document, undefined, {}, { ...roomy, maxCost: Number.MAX_SAFE_INTEGER, maxDepth: 100 })).not.toThrow();
      expect(Number(process.hrtime.bigint() - started) / 1e9).toBeLessThan(5);
    });
  });

  describe('page size', () => {
    it('refuses a connection without first, with first over the maximum, negative or null, as a validation failure', () => {
      expect(refusal(measure('{ posts { nodes { id } } }'))).toEqual({ code: 'VALIDATION_FAILED', message: `Page size: posts needs \`first\` (at most ${MAX_PAGE_SIZE}).` });
      expect(refusal(measure('{ posts(first: 101) { nodes { id } } }'))).toEqual({
        code: 'VALIDATION_FAILED',
        message: `Page size: \`first\` of posts must be an integer from 0 to ${MAX_PAGE_SIZE}.`,
      });
      expect(refusal(measure('{ posts(first: -1) { nodes { id } } }'))?.code).toBe('VALIDATION_FAILED');
      expect(refusal(measure('{ posts(first: null) { nodes { id } } }'))?.code).toBe('VALIDATION_FAILED');
      expect(refusal(measure('query ($n: Int) { posts(first: $n) { nodes { id } } }', { n: 1000 }))?.code).toBe('VALIDATION_FAILED');
      expect(refusal(measure('query ($n: Int) { posts(first: $n) { nodes { id } } }', {}))?.code).toBe('VALIDATION_FAILED');
      expect(refusal(measure('{ me { posts(first: 500) { nodes { id } } } }'))?.code).toBe('VALIDATION_FAILED');
    });
  });

  describe('aliases', () => {
    it('refuses more aliased fields than the maximum, counting those inside fragments per spread', () => {
      expect(measure('{ a: me { id } b: me { id } c: me { id } d: me { id } e: me { id } }')).toBeNull();
      expect(refusal(measure('{ a: me { id } b: me { id } c: me { id } d: me { id } e: me { id } f: me { id } }'))).toEqual({
        code: 'QUERY_TOO_COMPLEX',
        message: 'Alias limit: the query has more than 5 aliased fields.',
      });
      expect(refusal(measure('{ me { ...A ...A } } fragment A on User { x: id y: name z: id }'))?.code).toBe('QUERY_TOO_COMPLEX');
      expect(refusal(measure('{ a: __typename b: __typename c: __typename d: __typename e: __typename f: __typename }'))?.code).toBe('QUERY_TOO_COMPLEX');
    });
  });

  describe('directives', () => {
    it('refuses a field carrying more directives than the maximum', () => {
      expect(measure('query ($t: Boolean!) { me @include(if: $t) @skip(if: false) { id } }', { t: true })).toBeNull();
      const error = measure('query ($t: Boolean!) { me @include(if: $t) @include(if: true) @skip(if: false) { id } }', { t: true }, undefined);
      expect(refusal(error)).toEqual({ code: 'QUERY_TOO_COMPLEX', message: 'Directive limit: me carries 3 directives, at most 2 are allowed.' });
    });
  });

  describe('tokens', () => {
    it('stops parsing at the first token over the limit and says so', () => {
      const huge = `{ ${Array.from({ length: 1000 }, () => 'me { id }').join(' ')} }`;
      expect(refusal(measure(huge))).toEqual({ code: 'QUERY_TOO_COMPLEX', message: 'Token limit: the document has more than 400 tokens.' });
    });

    it('leaves syntax errors to the caller as they are', () => {
      expect(() => parseWithinLimits('{ me { id }', LIMITS)).toThrow(GraphQLError);
      expect(() => parseWithinLimits('{ me { id }', LIMITS)).not.toThrow(LimitExceededError);
    });
  });

  describe('batch size', () => {
    it('refuses any array body when batching is off, and longer arrays than allowed when on', () => {
      expect(() => checkBatchSize(1, LIMITS)).not.toThrow();
      expect(() => checkBatchSize(2, LIMITS)).toThrow(new LimitExceededError('QUERY_TOO_COMPLEX', 'Batch size limit: 2 operations sent, batched requests are not accepted.'));
      expect(() => checkBatchSize(5, { ...LIMITS, maxBatch: 5 })).not.toThrow();
      expect(() => checkBatchSize(6, { ...LIMITS, maxBatch: 5 })).toThrow('Batch size limit: 6 operations sent, at most 5 operations per request.');
    });
  });

  it('measures what is below unknown fields, types and fragments, which validation refuses afterwards', () => {
    const document = (query: string) => parseWithinLimits(query, { ...LIMITS, maxTokens: 10_000 });
    const aliases = Array.from({ length: 6 }, (_, index) => `a${index}: id`).join(' ');
    expect(() => checkDocumentLimits(schema, document(`{ nothing { ${aliases} } }`), undefined, {}, LIMITS)).toThrow('Alias limit');
    expect(() => checkDocumentLimits(schema, document(`{ me { ... on Nothing { ${aliases} } } }`), undefined, {}, LIMITS)).toThrow('Alias limit');
    expect(() => checkDocumentLimits(schema, document(`{ me { ...N } } fragment N on Nothing { ${aliases} }`), undefined, {}, LIMITS)).toThrow('Alias limit');
    expect(() => checkDocumentLimits(schema, document('{ nothing { a { b { c { d { e { f } } } } } } }'), undefined, {}, LIMITS)).toThrow('Depth limit');
    // A cycle of spreads is measured once round and left to validation.
    expect(() => checkDocumentLimits(schema, document('{ me { ...A } } fragment A on User { ...B } fragment B on User { ...A }'), undefined, {}, LIMITS)).not.toThrow();
  });

  it('measures nothing when the document names no runnable operation (execution reports that)', () => {
    const document = parse('query A { me { id } } query B { me { id } }');
    expect(() => checkDocumentLimits(schema, document, undefined, {}, LIMITS)).not.toThrow();
    expect(() => checkDocumentLimits(schema, document, 'C', {}, LIMITS)).not.toThrow();
  });
});
