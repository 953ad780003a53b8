import { routes, type OperationId } from '../../generated/routes.js';
import type { ErrorDetail } from '../errors/registry.js';
import { partValidator, validationDetails } from '../rest/validation.js';
import { UsageError } from './cli-errors.js';

/**
 * The CLI validates what it writes with the same compiled contract schemas as the REST `validate` stage
 * (openapi.yaml is the one source of truth for lengths, formats, enums and bounds), so an operator cannot
 * create a row the API would have refused. Ajv fills in the contract's defaults, as it does for REST.
 */
export function checkContractInput<T>(
  operationId: OperationId,
  part: 'body' | 'querystring',
  input: Record<string, unknown>,
  optionNames: Readonly<Record<string, string>>,
): T {
  const route = routes.find((r) => r.operationId === operationId);
  const schema = route?.schema[part];
  if (!route || !schema) throw new Error(`the contract has no ${part} schema for ${operationId}`);
  const validate = partValidator(schema, part);
  const data = structuredClone(input);
  if (!validate(data)) throw invalidOptions(validationDetails(validate.errors ?? [], part), optionNames);
  return data as T;
}

/**
 * Contract details name JSON pointers such as `/body/scopes/1`; the operator typed `--scope`, so each
 * detail is reported against the option that carried the value.
 */
export function invalidOptions(details: readonly ErrorDetail[], optionNames: Readonly<Record<string, string>>): UsageError {
  const lines = details.map(({ path, message }) => {
    const field = path.split('/')[2] ?? '';
    const option = optionNames[field];
    return option ? `--${option}${optionValueIndex(path)}: ${message}` : `${path}: ${message}`;
  });
  return new UsageError(lines.length === 1 ? lines[0]! : `invalid options:\n  ${lines.join('\n  ')}`);
}

/** For a repeatable option, which occurrence was wrong (1-based, as the operator counts). */
function optionValueIndex(path: string): string {
  const index = path.split('/')[3];
  return index !== undefined && /^\d+$/.test(index) ? ` #${Number(index) + 1}` : '';
}
