import type { PluginFunction } from '@graphql-codegen/plugin-helpers';
import openapiTS, { astToString } from 'openapi-typescript';
import { BANNER, loadContracts, type ContractPluginConfig } from '../contract-plugin.js';

/** generated/openapi.d.ts: openapi-typescript's types for every path, operation and schema of openapi.yaml. */
export const plugin: PluginFunction<ContractPluginConfig> = async (schema, _documents, config) => {
  const { doc } = loadContracts(schema, config);
  const ast = await openapiTS(structuredClone(doc) as never, { alphabetize: false });
  return BANNER + astToString(ast);
};
