import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { pointerToken } from '../errors/json-pointer.js';
import type { ErrorDetail } from '../errors/registry.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;

function createAjv(coerce: boolean): Ajv2020 {
  // The contract is OpenAPI 3.1, i.e. JSON Schema 2020-12. Unknown properties are errors, never
  // silently dropped (no mass assignment): removeAdditional stays off.
  const ajv = new Ajv2020({
    allErrors: true,
    removeAdditional: false,
    useDefaults: true,
    coerceTypes: coerce ? 'array' : false,
    strict: true,
    strictRequired: false,
    allowUnionTypes: true,
  });
  addFormats(ajv);
  return ajv;
}

// Path, query and header values arrive as strings and are coerced to the contract's types;
// JSON bodies already carry types, so a string where a number belongs is an error there.
const coercing = createAjv(true);
const strictTypes = createAjv(false);

const compiled = { body: new WeakMap<object, ValidateFunction>(), other: new WeakMap<object, ValidateFunction>() };

/** Each operation is routed twice (/v1 and unprefixed); its schemas are compiled once. */
export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const isBody = httpPart === 'body';
  const cache = isBody ? compiled.body : compiled.other;
  let validate = cache.get(schema as object);
  if (!validate) {
    validate = isBody ? strictTypes.compile(schema as object) : finiteOnly(coercing.compile(schema as object));
    cache.set(schema as object, validate);
  }
  return validate;
};

/**
 * Ajv coerces the strings "Infinity" and "-Infinity" to numbers and then skips its numeric keywords (they look
 * at finite numbers only), so `?limit=Infinity` would pass validation and reach the database. A coerced value
 * must be a finite number.
 */
function finiteOnly(validate: ValidateFunction): ValidateFunction {
  const guarded = ((data: unknown) => {
    const valid = validate(data);
    const infinite = valid ? nonFinitePath(data) : null;
    guarded.errors =
      infinite === null
        ? validate.errors
        : [{ instancePath: infinite, schemaPath: '#/type', keyword: 'type', params: {}, message: 'must be a finite number' }];
    return valid && infinite === null;
  }) as ValidateFunction;
  return guarded;
}

function nonFinitePath(data: unknown): string | null {
  if (!data || typeof data !== 'object') return null;
  for (const [name, value] of Object.entries(data)) {
    const items = Array.isArray(value) ? value : [value];
    const index = items.findIndex((item) => typeof item === 'number' && !Number.isFinite(item));
    if (index >= 0) return `/${pointerToken(name)}${Array.isArray(value) ? `/${index}` : ''}`;
  }
  return null;
}

// The contract's Error schema: `path` names the request part first, e.g. `/body/title` or `/query/limit`.
const PART_PREFIX: Record<string, string> = { body: '/body', querystring: '/query', params: '/path', headers: '/headers' };

/** Ajv errors as `{ path, message }` details, the path a JSON pointer into the named request part. */
export function validationDetails(errors: ErrorObject[], part: string | undefined): ErrorDetail[] {
  const prefix = PART_PREFIX[part ?? 'body'] ?? '/body';
  return errors.slice(0, 100).map((e) => {
    let path = e.instancePath;
    let message = e.message ?? 'is not valid';
    if (e.keyword === 'additionalProperties') {
      path = `${path}/${pointerToken(String((e.params as { additionalProperty: string }).additionalProperty))}`;
      message = 'is not a known property';
    } else if (e.keyword === 'required') {
      path = `${path}/${pointerToken(String((e.params as { missingProperty: string }).missingProperty))}`;
      message = 'is required';
    } else if (e.keyword === 'enum') {
      message = `must be one of ${((e.params as { allowedValues: unknown[] }).allowedValues ?? []).map(String).join(', ')}`;
    }
    return { path: `${prefix}${path}`, message };
  });
}
