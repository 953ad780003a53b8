import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { pointerToken } from '../errors/json-pointer.js';
import { ApiError, type ErrorDetail } from '../errors/registry.js';
import type { RouteDefinition } from './route-definition.js';

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
  restrictDateTime(ajv);
  return ajv;
}

/**
 * RFC 3339 admits instants an ECMAScript Date cannot hold (a leap second, 23:59:60), which the handlers
 * would then fail to compare: `date-time` here is RFC 3339's grammar and a representable instant.
 */
function restrictDateTime(ajv: Ajv2020): void {
  const rfc3339 = ajv.formats['date-time'];
  const grammar =
    typeof rfc3339 === 'function'
      ? rfc3339
      : rfc3339 && typeof rfc3339 === 'object' && 'validate' in rfc3339 && typeof rfc3339.validate === 'function'
        ? (rfc3339.validate as (value: string) => boolean)
        : null;
  if (!grammar) throw new Error('ajv-formats did not define date-time');
  ajv.addFormat('date-time', { type: 'string', validate: (value: string) => grammar(value) && Number.isFinite(Date.parse(value)) });
}

// Path, query and header values arrive as strings and are coerced to the contract's types;
// JSON bodies already carry types, so a string where a number belongs is an error there.
const coercing = createAjv(true);
const strictTypes = createAjv(false);

export type RequestPart = 'params' | 'body' | 'querystring' | 'headers';

/** The parts of a request as they are validated; path, query and header values are coerced in place. */
export type RequestParts = Record<RequestPart, unknown>;

/** For operations that declare no query parameters: any query parameter is unknown, hence a 400. */
const NO_QUERY_PARAMETERS = { type: 'object', additionalProperties: false } as const;

// Fastify's order: a request that is wrong in several parts is told about the first.
const PARTS: readonly RequestPart[] = ['params', 'body', 'querystring', 'headers'];

const compiled = { body: new WeakMap<object, ValidateFunction>(), other: new WeakMap<object, ValidateFunction>() };

/** One part's schema compiled (once: each operation is routed twice, /v1 and unprefixed). */
export function partValidator(schema: object, part: RequestPart): ValidateFunction {
  const isBody = part === 'body';
  const cache = isBody ? compiled.body : compiled.other;
  let validate = cache.get(schema);
  if (!validate) {
    validate = isBody ? strictTypes.compile(schema) : decimalNumeralsOnly(schema, coercing.compile(schema));
    cache.set(schema, validate);
  }
  return validate;
}

type RequestValidator = (parts: RequestParts) => void;

const validators = new WeakMap<RouteDefinition, RequestValidator>();

/**
 * The operation's request validator, compiled once per route from the contract's schemas: it throws
 * VALIDATION_FAILED naming the first invalid part, with a detail per problem.
 */
export function requestValidator(route: RouteDefinition): RequestValidator {
  let validator = validators.get(route);
  if (!validator) {
    const schemas: Partial<Record<RequestPart, object>> = { ...route.schema, querystring: route.schema.querystring ?? NO_QUERY_PARAMETERS };
    const checks = PARTS.flatMap((part) => {
      const schema = schemas[part];
      return schema ? [{ part, validate: partValidator(schema, part) }] : [];
    });
    validator = (parts) => {
      for (const { part, validate } of checks) {
        if (!validate(parts[part])) {
          throw new ApiError('VALIDATION_FAILED', 'The request does not match the contract.', {
            details: validationDetails(validate.errors ?? [], part),
          });
        }
      }
    };
    validators.set(route, validator);
  }
  return validator;
}

const DECIMAL = { integer: /^-?(0|[1-9][0-9]*)$/, number: /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/ } as const;

/** The numeric properties of a parameters schema, with the kind of numeral each accepts. */
function numericProperties(schema: object): [string, RegExp][] {
  const properties = (schema as { properties?: Record<string, { type?: unknown; items?: { type?: unknown } }> }).properties ?? {};
  return Object.entries(properties).flatMap(([name, property]): [string, RegExp][] => {
    const type = property.type === 'array' ? property.items?.type : property.type;
    return type === 'integer' || type === 'number' ? [[name, DECIMAL[type]]] : [];
  });
}

/**
 * Ajv coerces with JavaScript's number conversion, which also reads "0x10", "1e1", " 5" and "Infinity" (and
 * then skips range checks for the last). Path and query numbers must be plain decimal numerals before they
 * are coerced.
 */
function decimalNumeralsOnly(schema: object, validate: ValidateFunction): ValidateFunction {
  const numeric = numericProperties(schema);
  if (numeric.length === 0) return validate;
  const guarded = ((data: unknown) => {
    const bad = data && typeof data === 'object' ? findNonDecimal(data as Record<string, unknown>, numeric) : null;
    if (bad !== null) {
      guarded.errors = [{ instancePath: bad, schemaPath: '#/type', keyword: 'type', params: {}, message: 'must be a decimal number' }];
      return false;
    }
    const valid = validate(data);
    guarded.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  return guarded;
}

function findNonDecimal(data: Record<string, unknown>, numeric: [string, RegExp][]): string | null {
  for (const [name, numeral] of numeric) {
    const value = data[name];
    const items = Array.isArray(value) ? value : [value];
    const index = items.findIndex((item) => typeof item === 'string' && !numeral.test(item));
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

/**
 * The replacement bodies of the contract (PUT operations' request bodies), by operationId, as PATCH needs
 * them: the fields each takes, and the body checked with the same compiled validator as a PUT's body.
 */
export function replacementContracts(routes: readonly RouteDefinition[]): (operationId: string) => { fields: readonly string[]; check(body: unknown): unknown } {
  const byId = new Map(routes.filter((route) => route.method === 'PUT' && route.schema.body).map((route) => [route.operationId, route.schema.body!]));
  return (operationId) => {
    const schema = byId.get(operationId);
    if (!schema) throw new Error(`The contract has no replacement body for ${operationId}`);
    const validate = partValidator(schema, 'body');
    return {
      fields: Object.keys((schema as { properties?: object }).properties ?? {}),
      check(body) {
        if (!validate(body)) {
          throw new ApiError('VALIDATION_FAILED', 'The patched resource does not match the contract.', { details: validationDetails(validate.errors ?? [], 'body') });
        }
        return body;
      },
    };
  };
}
