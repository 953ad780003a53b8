import { ApiError } from '../errors/registry.js';
import { partValidator, validationDetails } from '../rest/validation.js';
import type { GraphqlContext } from './context.js';

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
