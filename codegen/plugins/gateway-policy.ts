import type { PluginFunction } from '@graphql-codegen/plugin-helpers';
import { loadContracts, type ContractPluginConfig } from '../contract-plugin.js';
import { gatewayPolicy } from '../gateway-policy.js';

/** generated/gateway-policy.json: the coarse checks an API gateway in front of the service may enforce. */
export const plugin: PluginFunction<ContractPluginConfig> = (schema, _documents, config) => {
  const { routes } = loadContracts(schema, config);
  return `${JSON.stringify(gatewayPolicy(routes), null, 2)}\n`;
};
