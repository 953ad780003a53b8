import type { PluginFunction } from '@graphql-codegen/plugin-helpers';
import { renderAccessMatrix } from '../access-matrix.js';
import { loadContracts, type ContractPluginConfig } from '../contract-plugin.js';

/** generated/access.md: every REST operation and GraphQL root field with the access it takes, for review. */
export const plugin: PluginFunction<ContractPluginConfig> = (schema, _documents, config) => {
  const { routes, policy } = loadContracts(schema, config);
  return renderAccessMatrix(routes, policy);
};
