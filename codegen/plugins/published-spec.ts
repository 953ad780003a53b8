import type { PluginFunction } from '@graphql-codegen/plugin-helpers';
import { loadContracts, type ContractPluginConfig } from '../contract-plugin.js';
import { publishSpec } from '../publish-spec.js';

/** generated/openapi.json: the contract as GET /v1/rest publishes it, with the OAuth 2.0 security requirements. */
export const plugin: PluginFunction<ContractPluginConfig> = (schema, _documents, config) => {
  const { doc } = loadContracts(schema, config);
  return `${JSON.stringify(publishSpec(doc), null, 2)}\n`;
};
