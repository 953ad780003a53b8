import fs from 'node:fs';
import path from 'node:path';
import { buildSchema, type GraphQLSchema } from 'graphql';
import YAML from 'yaml';
import type { JsonSchema, RouteDefinition } from '../src/rest/route-definition.js';
import type { PolicyTable } from '../src/policy/table.js';
import type { PolicySource } from './access-rule.js';
import { compileGraphqlAccess } from './graphql-access.js';
import { checkMutationInputs } from './graphql-inputs.js';
import type { OpenApiDocument } from './json-schema.js';
import { compileResources } from './policy-table.js';
import { Problems } from './problems.js';
import { checkPublishable } from './publish-spec.js';
import { compileRoutes } from './rest-routes.js';

/** The three contracts: openapi.yaml and policy.yaml as text, schema.graphql as graphql-codegen loads it. */
export interface ContractSources {
  openapi: string;
  policy: string;
  schema: GraphQLSchema;
}

/** What every REST and policy output is rendered from. */
export interface CompiledContracts {
  doc: OpenApiDocument;
  routes: RouteDefinition[];
  /** The schemas routes reference (`{ $ref: '<$id>#' }`), each once. */
  sharedSchemas: JsonSchema[];
  policy: PolicyTable;
}

/** Reads the contracts from a checkout (the plugins get schema.graphql from graphql-codegen instead). */
export function readSources(root = process.cwd()): ContractSources {
  const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
  return { openapi: read('openapi.yaml'), policy: read('policy.yaml'), schema: buildSchema(read('schema.graphql')) };
}

function scopeCatalogue(doc: any, problems: Problems): Record<string, string> {
  const flows = doc.components?.securitySchemes?.oauth2?.flows ?? {};
  const catalogue: Record<string, string> = {};
  for (const flow of Object.values<any>(flows)) Object.assign(catalogue, flow.scopes ?? {});
  if (Object.keys(catalogue).length === 0) {
    problems.add('openapi.yaml', 'components.securitySchemes.oauth2', 'declares no scopes (the scope catalogue)');
  }
  // The Scope schema enumerates the catalogue for SDKs; the two lists must not drift apart.
  const scopeEnum: unknown = doc.components?.schemas?.Scope?.enum;
  if (Array.isArray(scopeEnum)) {
    const listed = [...scopeEnum].map(String).sort();
    const declared = Object.keys(catalogue).sort();
    if (JSON.stringify(listed) !== JSON.stringify(declared)) {
      problems.add('openapi.yaml', 'components.schemas.Scope', `enum must list exactly the oauth2 scopes (${declared.join(', ')})`);
    }
  }
  return catalogue;
}

/**
 * Checks every access rule and compiles the route and policy tables. Throws ContractError listing every
 * problem, each naming its file and operation or field: default deny is enforced at build time.
 */
export function compileContracts(sources: ContractSources): CompiledContracts {
  const problems = new Problems();
  const doc = YAML.parse(sources.openapi);
  const policySource = YAML.parse(sources.policy) as PolicySource;
  if (doc?.openapi?.startsWith?.('3.1') !== true) problems.add('openapi.yaml', 'openapi', 'must be an OpenAPI 3.1 document');
  const scopes = scopeCatalogue(doc, problems);
  const resources = compileResources(policySource, doc, problems);
  const { routes, sharedSchemas } = compileRoutes(doc, scopes, policySource, problems);
  const graphql = compileGraphqlAccess(sources.schema, scopes, policySource, problems);
  checkMutationInputs(sources.schema, doc, problems);
  checkPublishable(doc, problems);
  problems.throwIfAny();

  const policy: PolicyTable = {
    scopes,
    permissions: policySource.permissions,
    roles: Object.fromEntries(
      Object.entries(policySource.roles).map(([name, role]) => [name, { description: role.description, permissions: role.permissions }]),
    ),
    resources,
    operations: {
      ...Object.fromEntries(routes.map((r) => [r.access.id, r.access])),
      ...graphql.operations,
    },
    graphqlTypes: graphql.types,
  };
  return { doc, routes, sharedSchemas, policy };
}
