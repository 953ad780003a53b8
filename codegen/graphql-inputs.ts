import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isNonNullType,
  type GraphQLField,
  type GraphQLInputField,
  type GraphQLSchema,
} from 'graphql';
import { deref, type OpenApiDocument } from './json-schema.js';
import type { Problems } from './problems.js';

const FILE = 'schema.graphql';

/**
 * A mutation's `input` is validated at run time by the request-body validator of the REST operation of the
 * same name (src/graphql/input-validation.ts), so the two must say the same: the same fields, required in
 * both or in neither (a GraphQL field is required when it is non-null without a default), and an enum field
 * with exactly the REST property's values. Every difference is a problem naming the field.
 */
export function checkMutationInputs(schema: GraphQLSchema, doc: OpenApiDocument, problems: Problems): void {
  const operations = new Map<string, any>();
  for (const item of Object.values<any>(doc.paths ?? {})) {
    for (const op of Object.values<any>(item ?? {})) if (op && typeof op === 'object' && typeof op.operationId === 'string') operations.set(op.operationId, op);
  }
  const mutation = schema.getMutationType();
  if (!mutation) return;
  for (const field of Object.values(mutation.getFields()) as GraphQLField<unknown, unknown>[]) {
    const input = field.args.find((arg) => arg.name === 'input');
    if (!input) continue;
    const where = `Mutation.${field.name}(input:)`;
    const inputType = getNamedType(input.type);
    if (!isInputObjectType(inputType)) {
      problems.add(FILE, where, 'must be an input object type');
      continue;
    }
    const op = operations.get(field.name);
    const body = op?.requestBody?.content?.['application/json']?.schema;
    if (!body) {
      problems.add(FILE, where, `no REST operation "${field.name}" with a JSON body validates this input`);
      continue;
    }
    const rest = deref(doc, body);
    const properties: Record<string, any> = rest.properties ?? {};
    const required = new Set<string>(rest.required ?? []);
    const fields = inputType.getFields();
    for (const [name, inputField] of Object.entries(fields) as [string, GraphQLInputField][]) {
      const at = `${inputType.name}.${name} (${where})`;
      const property = properties[name];
      if (!property) {
        problems.add(FILE, at, `is not a property of ${field.name}'s request body`);
        continue;
      }
      const requiredHere = isNonNullType(inputField.type) && inputField.defaultValue === undefined;
      if (requiredHere !== required.has(name)) {
        problems.add(FILE, at, requiredHere ? `is required here but optional in ${field.name}'s request body` : `is optional here but required in ${field.name}'s request body`);
      }
      const named = getNamedType(inputField.type);
      if (isEnumType(named)) {
        const restValues = (deref(doc, property).enum ?? []).map(String).sort();
        const values = named.getValues().map((value) => value.name).sort();
        if (JSON.stringify(values) !== JSON.stringify(restValues)) {
          problems.add(FILE, at, `enum ${named.name} (${values.join(', ')}) differs from ${field.name}'s request body (${restValues.join(', ')})`);
        }
      }
    }
    for (const name of required) {
      if (!(name in fields)) problems.add(FILE, `${inputType.name} (${where})`, `lacks "${name}", required in ${field.name}'s request body`);
    }
  }
}
