import type { FastifyBaseLogger } from 'fastify';
import { GraphQLError } from 'graphql';
import { toApiError } from '../errors/rest-renderer.js';

/** GraphQL errors as this server sends them: the registry's code in `extensions.code`, never a cause's internals. */
export interface GraphqlErrorBody {
  message: string;
  locations?: readonly { line: number; column: number }[];
  path?: readonly (string | number)[];
  extensions: { code: string; details?: { path: string; message: string }[] };
}

/** graphql-js words some validation errors with a guess at what was meant; those guesses leak the schema. */
export function withoutSuggestions(message: string): string {
  return message.replace(/ ?Did you mean [^?]*\?/g, '');
}

/** A syntax, validation or variable error: VALIDATION_FAILED, the message without suggestions. */
export function requestError(error: unknown): GraphqlErrorBody {
  const e = error as { message?: string; locations?: readonly { line: number; column: number }[] };
  const body: GraphqlErrorBody = { message: withoutSuggestions(String(e.message ?? 'The document is not valid.')), extensions: { code: 'VALIDATION_FAILED' } };
  if (e.locations && e.locations.length > 0) body.locations = e.locations.map(({ line, column }) => ({ line, column }));
  return body;
}

/** A field's error from execution: the registry's code and message, or INTERNAL with nothing of its cause. */
export function fieldError(error: GraphQLError, log: FastifyBaseLogger): GraphqlErrorBody {
  const original = error.originalError;
  let body: GraphqlErrorBody;
  if (original === undefined || original === null || original instanceof GraphQLError) {
    body = { message: withoutSuggestions(error.message), extensions: { code: 'VALIDATION_FAILED' } };
  } else {
    const api = toApiError(original);
    if (api.status >= 500) log.error({ err: original }, 'graphql field failed');
    body = { message: api.message, extensions: { code: api.code } };
    if (api.details && api.details.length > 0) body.extensions.details = api.details;
  }
  if (error.locations) body.locations = error.locations.map(({ line, column }) => ({ line, column }));
  if (error.path) body.path = error.path;
  return body;
}
