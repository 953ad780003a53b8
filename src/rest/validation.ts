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

type RequestValidator = (params: unknown, body: unknown, querystring: unknown, headers: unknown) => void;
type PartCheck = ((data: unknown) => void) | null;

const validators = new WeakMap<RouteDefinition, RequestValidator>();

/**
 * The operation's request validator, compiled once per route from the contract's schemas: it throws
 * VALIDATION_FAILED naming the first invalid part (Fastify's order: params, body, query, headers), with a
 * detail per problem.
 */
export function requestValidator(route: RouteDefinition): RequestValidator {
  let validator = validators.get(route);
  if (!validator) {
    const schemas: Partial<Record<RequestPart, object>> = { ...route.schema, querystring: route.schema.querystring ?? NO_QUERY_PARAMETERS };
    const [params, body, querystring, headers] = PARTS.map((part) => partCheck(schemas[part], part)) as [PartCheck, PartCheck, PartCheck, PartCheck];
    validator = (p, b, q, h) => {
      if (params !== null) params(p);
      if (body !== null) body(b);
      if (querystring !== null) querystring(q);
      if (headers !== null) headers(h);
    };
    validators.set(route, validator);
  }
  return validator;
}

function partCheck(schema: object | undefined, part: RequestPart): PartCheck {
  if (!schema) return null;
  const validate = partValidator(schema, part);
  const plain = part === 'body' ? null : plainAcceptor(schema);
  return (data) => {
    if (plain !== null && plain(data)) return;
    if (!validate(data)) {
      throw new ApiError('VALIDATION_FAILED', 'The request does not match the contract.', { details: validationDetails(validate.errors ?? [], part) });
    }
  };
}

/** Keywords that only describe: they change neither what is valid nor the data. */
const ANNOTATIONS = ['description', 'title', 'examples', 'deprecated', '$comment'];
const OBJECT_KEYWORDS = new Set(['type', 'properties', 'required', 'additionalProperties', ...ANNOTATIONS]);
const STRING_KEYWORDS = new Set(['type', 'minLength', 'maxLength', 'pattern', 'enum', 'default', ...ANNOTATIONS]);

/**
 * A quick proof that a set of parameters (path, query or headers) is valid as it stands, for the usual
 * request: string parameters that match their patterns, absent ones filled with their defaults as Ajv fills
 * them. It answers true only where Ajv would accept the object without coercing anything; anything else
 * (a number or a list to coerce, a format, a value out of bounds) is left to Ajv, which decides and names the
 * problems. Null when the schema is not a flat object of such parameters.
 */
export function plainAcceptor(schema: object): ((data: unknown) => boolean) | null {
  const object = schema as { type?: unknown; properties?: Record<string, Record<string, unknown>>; required?: string[]; additionalProperties?: unknown };
  if (object.type !== 'object' || !Object.keys(object).every((keyword) => OBJECT_KEYWORDS.has(keyword))) return null;
  if (object.additionalProperties !== undefined && typeof object.additionalProperties !== 'boolean') return null;
  const entries = Object.entries(object.properties ?? {});
  const required = new Set(object.required ?? []);
  if ([...required].some((name) => !entries.some(([property]) => property === name))) return null;
  const properties = entries.map(([name, property]) => ({
    name,
    required: required.has(name),
    // Filled in by Ajv (useDefaults) when absent, and then validated and coerced: filled in here only when
    // it is a plain value Ajv takes as it is.
    fill: plainDefault(name, property),
    defaulted: 'default' in property,
    accepts: stringAcceptor(property),
  }));
  // Compiled like Ajv's validators, one function per schema, so that each reads its properties by name.
  const lines = ['if (data === null || typeof data !== "object" || Array.isArray(data)) return false;'];
  if (object.additionalProperties === false) lines.push('for (const key in data) if (!known.has(key)) return false;');
  properties.forEach((property, i) => {
    const at = `data[${JSON.stringify(property.name)}]`;
    const absent = property.required || (property.defaulted && property.fill === undefined) ? 'return false;' : property.fill !== undefined ? `${at} = fills[${i}];` : '';
    const present = property.accepts === null ? 'return false;' : `if (!accepts[${i}](value)) return false;`;
    lines.push(`{ const value = ${at}; if (value !== undefined) { ${present} } else { ${absent} } }`);
  });
  lines.push('return true;');
  const compile = new Function('known', 'accepts', 'fills', `return function accept(data) {\n${lines.join('\n')}\n};`);
  return compile(
    new Set(entries.map(([name]) => name)),
    properties.map((property) => property.accepts),
    properties.map((property) => property.fill),
  ) as (data: unknown) => boolean;
}

/** The property's default when it is a string, number or boolean Ajv accepts unchanged; else undefined. */
function plainDefault(name: string, property: Record<string, unknown>): string | number | boolean | undefined {
  const value = property.default;
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') return undefined;
  const data: Record<string, unknown> = { [name]: value };
  const accepted = coercing.compile({ type: 'object', properties: { [name]: property } })(data);
  return accepted && data[name] === value ? value : undefined;
}

/** A string property's check (null for any other kind of property: Ajv decides those). */
function stringAcceptor(property: Record<string, unknown>): ((value: unknown) => boolean) | null {
  if (property.type !== 'string' || !Object.keys(property).every((keyword) => STRING_KEYWORDS.has(keyword))) return null;
  const max = typeof property.maxLength === 'number' ? property.maxLength : Infinity;
  const min = typeof property.minLength === 'number' ? property.minLength : 0;
  // As Ajv compiles patterns (unicodeRegExp).
  const pattern = typeof property.pattern === 'string' ? new RegExp(property.pattern, 'u') : null;
  const allowed = Array.isArray(property.enum) ? new Set(property.enum) : null;
  // Ajv counts code points; a string has at most as many as UTF-16 units and at least half as many, so a
  // length near a bound is left to Ajv.
  return (value) =>
    typeof value === 'string' &&
    value.length <= max &&
    Math.ceil(value.length / 2) >= min &&
    (pattern === null || pattern.test(value)) &&
    (allowed === null || allowed.has(value));
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
