import type { PluginFunction } from '@graphql-codegen/plugin-helpers';
import { BANNER, loadContracts, type ContractPluginConfig } from '../contract-plugin.js';

/**
 * generated/routes.ts: the route table Fastify serves, one entry per operation of openapi.yaml, and the
 * schemas its routes share by reference (the error body), each written once.
 */
export const plugin: PluginFunction<ContractPluginConfig> = (schema, _documents, config) => {
  const { routes, sharedSchemas } = loadContracts(schema, config);
  const operationIds = routes.map((r) => JSON.stringify(r.operationId)).join(' | ');
  return (
    BANNER +
    `import type { JsonSchema, RouteDefinition } from '../src/rest/route-definition.js';\n\n` +
    `export type OperationId = ${operationIds};\n\n` +
    `/** Referenced from the routes as \`{ "$ref": "<$id>#" }\`. */\n` +
    `export const sharedSchemas: readonly JsonSchema[] = ${JSON.stringify(sharedSchemas, null, 2)};\n\n` +
    `export const routes: readonly RouteDefinition[] = ${JSON.stringify(routes, null, 2)};\n`
  );
};
