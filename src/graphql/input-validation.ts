import { ApiError } from '../errors/registry.js';
import { findInvalidText, invalidTextError } from '../rest/text-integrity.js';
import { partValidator, validationDetails } from '../rest/validation.js';
import type { GraphqlContext } from './context.js';

/**
 * The contract's `Id` (openapi.yaml, components.schemas.Id), which REST holds every id in a path or a query
 * to. A test keeps the two the same.
 */
export const ID_SCHEMA = { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' } as const;

/**
 * Whether a root field's argument is an `ID` of schema.graphql: `id`, or a name ending in `Id` (`postId`,
 * `authorId`). The resolvers hand over arguments without their types; a test holds every argument of the
 * schema to this naming.
 */
export function isIdArgument(name: string): boolean {
  return name === 'id' || name.endsWith('Id');
}

/**
 * A root field's arguments, its variables' values among them, held to what REST holds a request to before
 * anything reads the database: no string or key anywhere in them (an input object's fields included) with a
 * NUL or an unpaired surrogate, then each ID argument the contract's `Id`. Refused as VALIDATION_FAILED with
 * REST's messages, the path a pointer into the arguments (`/id`, `/input/title`).
 */
export function validateArguments(args: Readonly<Record<string, unknown>>): void {
  const invalidText = findInvalidText(args, '');
  if (invalidText !== null) throw invalidTextError(invalidText);
  const validate = partValidator(ID_SCHEMA, 'body');
  for (const [name, value] of Object.entries(args)) {
    // An optional ID left out (`posts(authorId:)`) is null or absent: it filters nothing.
    if (!isIdArgument(name) || value == null || validate(value)) continue;
    const details = validationDetails(validate.errors ?? [], 'body').map((detail) => ({ ...detail, path: detail.path.replace(/^\/body/, `/${name}`) }));
    throw new ApiError('VALIDATION_FAILED', 'The request does not match the contract.', { details });
  }
}

/**
 * A mutation's input checked by the same compiled validator as its REST operation's body (lengths,
 * formats, enums: what the SDL cannot say). Refused as VALIDATION_FAILED with a detail per problem, the path
 * a pointer into the `input` argument.
 */
export function validateInput<T>(ctx: GraphqlContext, operationId: string, input: T): T {
  const schema = ctx.deps.bodySchemaOf(operationId);
  if (schema === null) return input;
  // graphql-js hands input objects over with a null prototype; the REST validator expects plain JSON.
  const plain = JSON.parse(JSON.stringify(input)) as T;
  const validate = partValidator(schema, 'body');
  if (!validate(plain)) {
    const details = validationDetails(validate.errors ?? [], 'body').map((detail) => ({ ...detail, path: detail.path.replace(/^\/body/, '/input') }));
    throw new ApiError('VALIDATION_FAILED', 'The input does not match the contract.', { details });
  }
  return plain;
}
