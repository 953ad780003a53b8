import type { PluginFunction } from '@graphql-codegen/plugin-helpers';
import { BANNER, loadContracts, type ContractPluginConfig } from '../contract-plugin.js';

/** generated/policy.ts: the policy table of both APIs, from x-scopes/x-permission/x-resource, @auth and policy.yaml. */
export const plugin: PluginFunction<ContractPluginConfig> = (schema, _documents, config) => {
  const { policy } = loadContracts(schema, config);
  return (
    BANNER +
    `import type { PolicyTable } from '../src/policy/table.js';\n\n` +
    `export const policy: PolicyTable = ${JSON.stringify(policy, null, 2)};\n`
  );
};
