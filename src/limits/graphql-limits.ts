import {
  getNamedType,
  GraphQLError,
  isObjectType,
  isInterfaceType,
  Kind,
  parse,
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLCompositeType,
  type GraphQLField,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';

/**
 * What a GraphQL document may ask of the server, checked before anything runs (queries, mutations and
 * subscriptions alike). Each is configurable; `maxPageSize` is the contract's, not a setting.
 */
export interface GraphqlLimits {
  /** Nested selection sets, fragments counted where they are spread. */
  maxDepth: number;
  /** Points per document: each field 1, a connection's selection times its `first`. */
  maxCost: number;
  /** Aliased fields per document, fragments counted per spread. */
  maxAliases: number;
  /** Lexical tokens; the parser stops at the first one over, so a huge document costs no more than this. */
  maxTokens: number;
  /** Directives on one field. */
  maxDirectivesPerField: number;
  /** Operations in one request body; 1 means batched arrays are refused. */
  maxBatch: number;
}

/** Largest `first` a connection accepts (the contract's page size maximum). */
export const MAX_PAGE_SIZE = 100;

/**
 * Introspection (`__schema`, `__type`) resolves from memory and is gated by its own scope; its subtrees are
 * kept out of the depth and cost of the data and held to this depth instead, enough for the introspection
 * query of GraphiQL and graphql-js (13) and no deeper.
 */
export const INTROSPECTION_MAX_DEPTH = 15;

export type LimitCode = 'QUERY_TOO_DEEP' | 'QUERY_TOO_COMPLEX' | 'VALIDATION_FAILED';

/** A document over a limit: the error code to answer with and a message that names the limit. */
export class LimitExceededError extends Error {
  constructor(
    readonly code: LimitCode,
    message: string,
  ) {
    super(message);
    this.name = 'LimitExceededError';
  }
}

/**
 * Refuses an operation that costs more than the caller's whole rate-limit budget holds (`largestCharge`):
 * it could never run. Checked before the cost is charged, so the refusal spends nothing more.
 */
export function checkAffordable(cost: number, budget: number): void {
  if (cost > budget) {
    throw new LimitExceededError(
      'QUERY_TOO_COMPLEX',
      `Cost limit: the operation costs ${cost} points, more than the ${budget} points the caller's rate-limit budget holds per window; ask for fewer items (\`first\`) or fewer fields.`,
    );
  }
}

/** Refuses a batch (an array body) longer than the limit allows, before any of it is parsed. */
export function checkBatchSize(operations: number, limits: GraphqlLimits): void {
  if (operations > limits.maxBatch) {
    const allowed = limits.maxBatch <= 1 ? 'batched requests are not accepted' : `at most ${limits.maxBatch} operations per request`;
    throw new LimitExceededError('QUERY_TOO_COMPLEX', `Batch size limit: ${operations} operations sent, ${allowed}.`);
  }
}

/**
 * Parses with the token limit: the parser gives up at the first token over it. Syntax errors are graphql-js's
 * (the caller answers them as a malformed request); the token limit is a LimitExceededError.
 */
export function parseWithinLimits(source: string, limits: GraphqlLimits): DocumentNode {
  try {
    return parse(source, { maxTokens: limits.maxTokens });
  } catch (error) {
    // graphql-js 16 words it "Document contains more that N tokens".
    if (error instanceof GraphQLError && /contains more th\w+ \d+ tokens/.test(error.message)) {
      throw new LimitExceededError('QUERY_TOO_COMPLEX', `Token limit: the document has more than ${limits.maxTokens} tokens.`);
    }
    throw error;
  }
}

/** What a selection set measures to; fragments are measured once and reused wherever they are spread. */
interface Measure {
  depth: number;
  introspectionDepth: number;
  cost: number;
  aliases: number;
}

const EMPTY: Measure = { depth: 0, introspectionDepth: 0, cost: 0, aliases: 0 };

/**
 * Measures the operation the request runs (by `operationName`, or the only one) against the limits and
 * throws LimitExceededError for the first limit it exceeds. Run it right after parsing, before GraphQL
 * validation: validation's check that fields can be merged is quadratic in the fields of a selection, so
 * aliases and directives are bounded first. It therefore takes any parsed document — unknown fields and
 * types, undefined or cyclic fragments (validation reports those afterwards) are measured as far as they
 * go, never followed forever — and measures each fragment once however often it is spread, so that a
 * document of nested, repeated spreads costs time linear in its size, not in what it expands to.
 * Says whether the verdict read a variable (a page size given as `$first`): one that did not holds for
 * every later run of the same document and operation.
 */
export function checkDocumentLimits(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Readonly<Record<string, unknown>> | null | undefined,
  limits: GraphqlLimits,
): { readVariables: boolean; cost: number } {
  let readVariables = false;
  const operation = selectOperation(document, operationName);
  if (!operation) return { readVariables, cost: 1 };
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  const rootType = schema.getRootType(operation.operation);
  if (!rootType) return { readVariables, cost: 1 };
  const measured = new Map<string, Measure>();
  const inProgress = new Set<string>();

  const variableDefaults = new Map<string, ValueNode>();
  for (const definition of operation.variableDefinitions ?? []) {
    if (definition.defaultValue) variableDefaults.set(definition.variable.name.value, definition.defaultValue);
  }

  /** `first` of a connection field: from a literal, a variable or its default; missing or over the maximum is refused. */
  const pageSize = (field: FieldNode, definition: GraphQLField<unknown, unknown>): number | null => {
    if (!definition.args.some((argument) => argument.name === 'first')) return null;
    const argument = field.arguments?.find((candidate) => candidate.name.value === 'first');
    let value: unknown;
    if (argument?.value.kind === Kind.INT) value = Number(argument.value.value);
    else if (argument?.value.kind === Kind.VARIABLE) {
      const name = argument.value.name.value;
      readVariables = true;
      const fallback = variableDefaults.get(name);
      value = variables?.[name] ?? (fallback?.kind === Kind.INT ? Number(fallback.value) : undefined);
    } else if (argument?.value.kind === Kind.NULL) value = undefined;
    else if (argument) value = Number.NaN;
    const at = `${definition.name}`;
    if (value === undefined || value === null) {
      throw new LimitExceededError('VALIDATION_FAILED', `Page size: ${at} needs \`first\` (at most ${MAX_PAGE_SIZE}).`);
    }
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_PAGE_SIZE) {
      throw new LimitExceededError('VALIDATION_FAILED', `Page size: \`first\` of ${at} must be an integer from 0 to ${MAX_PAGE_SIZE}.`);
    }
    return value;
  };

  const measureSelections = (selectionSet: SelectionSetNode, parent: GraphQLCompositeType | undefined): Measure => {
    let depth = 0;
    let introspectionDepth = 0;
    let cost = 0;
    let aliases = 0;
    for (const selection of selectionSet.selections) {
      let inner: Measure;
      if (selection.kind === Kind.FIELD) {
        inner = measureField(selection, parent);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        const typed = selection.typeCondition ? (schema.getType(selection.typeCondition.name.value) as GraphQLCompositeType | undefined) : parent;
        inner = measureSelections(selection.selectionSet, typed);
      } else {
        inner = measureFragment(selection.name.value);
      }
      depth = Math.max(depth, inner.depth);
      introspectionDepth = Math.max(introspectionDepth, inner.introspectionDepth);
      cost += inner.cost;
      aliases += inner.aliases;
      if (cost > limits.maxCost) throw tooCostly(limits);
      if (aliases > limits.maxAliases) throw tooManyAliases(limits);
    }
    return { depth, introspectionDepth, cost, aliases };
  };

  const measureFragment = (name: string): Measure => {
    const known = measured.get(name);
    if (known) return known;
    const fragment = fragments.get(name);
    // Undefined or cyclic spreads fail validation; measured as nothing here, never followed forever.
    if (!fragment || inProgress.has(name)) return EMPTY;
    const typed = schema.getType(fragment.typeCondition.name.value) as GraphQLCompositeType | undefined;
    inProgress.add(name);
    const measure = measureSelections(fragment.selectionSet, typed);
    inProgress.delete(name);
    measured.set(name, measure);
    return measure;
  };

  const measureField = (field: FieldNode, parent: GraphQLCompositeType | undefined): Measure => {
    const directives = field.directives?.length ?? 0;
    if (directives > limits.maxDirectivesPerField) {
      throw new LimitExceededError('QUERY_TOO_COMPLEX', `Directive limit: ${field.name.value} carries ${directives} directives, at most ${limits.maxDirectivesPerField} are allowed.`);
    }
    const aliased = field.alias ? 1 : 0;
    const name = field.name.value;
    if (name === '__typename') return { ...EMPTY, aliases: aliased };
    if (name === '__schema' || name === '__type') {
      const below = field.selectionSet ? introspectionDepthOf(field.selectionSet, fragments) : 0;
      return { depth: 0, introspectionDepth: 1 + below, cost: 0, aliases: aliased };
    }
    // A field the schema does not have fails validation; what is below it is measured all the same.
    const definition = isObjectType(parent) || isInterfaceType(parent) ? parent.getFields()[name] : undefined;
    const first = definition ? pageSize(field, definition) : null;
    if (!field.selectionSet) return { depth: 1, introspectionDepth: 0, cost: 1, aliases: aliased };
    const child = definition ? (getNamedType(definition.type) as GraphQLCompositeType) : undefined;
    const inner = measureSelections(field.selectionSet, child);
    const cost = 1 + (first ?? 1) * inner.cost;
    return { depth: 1 + inner.depth, introspectionDepth: inner.introspectionDepth, cost, aliases: aliased + inner.aliases };
  };

  const measure = measureSelections(operation.selectionSet, rootType);
  if (measure.depth > limits.maxDepth) {
    throw new LimitExceededError('QUERY_TOO_DEEP', `Depth limit: the query is ${measure.depth} levels deep, at most ${limits.maxDepth} are allowed.`);
  }
  if (measure.introspectionDepth > INTROSPECTION_MAX_DEPTH) {
    throw new LimitExceededError('QUERY_TOO_DEEP', `Depth limit: the introspection query is ${measure.introspectionDepth} levels deep, at most ${INTROSPECTION_MAX_DEPTH} are allowed.`);
  }
  // What the request weighs against its caller's rate limit: at least the one point of any request.
  return { readVariables, cost: Math.max(1, measure.cost) };
}

function tooCostly(limits: GraphqlLimits): LimitExceededError {
  return new LimitExceededError('QUERY_TOO_COMPLEX', `Cost limit: the query costs more than ${limits.maxCost} points (each field 1, a connection's fields times its \`first\`).`);
}

function tooManyAliases(limits: GraphqlLimits): LimitExceededError {
  return new LimitExceededError('QUERY_TOO_COMPLEX', `Alias limit: the query has more than ${limits.maxAliases} aliased fields.`);
}

/** The operation `operationName` names, or the document's only one; null when there is none to run. */
function selectOperation(document: DocumentNode, operationName: string | null | undefined): OperationDefinitionNode | null {
  const operations = document.definitions.filter((definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION);
  if (operationName) return operations.find((operation) => operation.name?.value === operationName) ?? null;
  return operations.length === 1 ? operations[0]! : null;
}

/** Depth below an introspection field, fragments followed once each (introspection types need no schema walk). */
function introspectionDepthOf(selectionSet: SelectionSetNode, fragments: ReadonlyMap<string, FragmentDefinitionNode>): number {
  const memo = new Map<string, number>();
  const inProgress = new Set<string>();
  const depthOf = (set: SelectionSetNode): number => {
    let depth = 0;
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) depth = Math.max(depth, selection.selectionSet ? 1 + depthOf(selection.selectionSet) : 1);
      else if (selection.kind === Kind.INLINE_FRAGMENT) depth = Math.max(depth, depthOf(selection.selectionSet));
      else {
        const name = selection.name.value;
        let known = memo.get(name);
        if (known === undefined) {
          const fragment = fragments.get(name);
          if (!fragment || inProgress.has(name)) continue;
          inProgress.add(name);
          known = depthOf(fragment.selectionSet);
          inProgress.delete(name);
          memo.set(name, known);
        }
        depth = Math.max(depth, known);
      }
    }
    return depth;
  };
  return depthOf(selectionSet);
}
