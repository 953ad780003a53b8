import { execute, type DocumentNode, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';

/** A document's operation that ran once, and runs compiled from its next run on. */
const SEEN_ONCE = 1;

/**
 * Queries, validated by the caller, run by graphql-jit from their second run on (a document sent once is
 * not worth compiling), one compiled function per parsed document and operation, kept for as long as the
 * document cache keeps the document. A document graphql-jit cannot compile runs on graphql-js.
 *
 * Run here rather than through Mercurius' `app.graphql()`, which would parse, validate and cache the
 * document again by its text, and coerce the variables a second time before the compiled query does.
 */
export class CompiledQueries {
  readonly #byDocument = new WeakMap<DocumentNode, Map<string, CompiledQuery | typeof SEEN_ONCE | null>>();

  constructor(private readonly schema: GraphQLSchema) {}

  run(
    document: DocumentNode,
    operationName: string | null | undefined,
    variables: Readonly<Record<string, unknown>> | null | undefined,
    context: object,
  ): Promise<ExecutionResult> | ExecutionResult {
    const name = operationName ?? '';
    let byName = this.#byDocument.get(document);
    if (!byName) this.#byDocument.set(document, (byName = new Map()));
    let compiled = byName.get(name);
    if (compiled === SEEN_ONCE) {
      const result = compileQuery(this.schema, document, operationName ?? undefined);
      compiled = isCompiledQuery(result) ? result : null;
      byName.set(name, compiled);
    } else if (compiled === undefined) {
      byName.set(name, SEEN_ONCE);
    }
    if (compiled) return compiled.query(undefined, context, { ...variables });
    return execute({ schema: this.schema, document, contextValue: context, variableValues: variables, operationName });
  }
}
