/**
 * The codegen config (@graphql-codegen/cli): compiles the contracts — openapi.yaml, schema.graphql and
 * policy.yaml — into generated/.
 *   npm run codegen          graphql-codegen --config codegen.ts          write generated/
 *   npm run codegen:check    graphql-codegen --config codegen.ts --check  fail when generated/ is stale (CI)
 * generated/graphql.ts comes from the typescript and typescript-resolvers plugins; every other file from a
 * local plugin in codegen/plugins/ that reads openapi.yaml and policy.yaml beside the schema graphql-codegen
 * loads. Those plugins fail the run, naming file and operation or field, when an access rule is missing or
 * names an unknown scope, permission or resource type: default deny is enforced at build time, and no file
 * is written.
 */
import type { CodegenConfig } from '@graphql-codegen/cli';
import { BANNER, type ContractPluginConfig } from './codegen/contract-plugin.js';
import { rejectUnknownOutputs } from './codegen/unknown-outputs.js';

const contracts: ContractPluginConfig = { openapi: 'openapi.yaml', policy: 'policy.yaml' };

const config: CodegenConfig = {
  schema: 'schema.graphql',
  // Keep schema.graphql's order (graphql-codegen sorts by default): the policy table lists root fields as written.
  config: { sort: false },
  // The local plugins are TypeScript; tsx loads them (graphql-codegen loads the config itself with jiti).
  require: ['tsx/esm'],
  generates: {
    'generated/graphql.ts': {
      plugins: [{ add: { content: BANNER.trimEnd() } }, 'typescript', 'typescript-resolvers'],
      config: {
        useTypeImports: true,
        scalars: { DateTime: 'string' },
        enumsAsTypes: true,
        contextType: '../src/graphql/context.js#GraphqlContext',
      },
    },
    'generated/openapi.d.ts': { plugins: ['./codegen/plugins/openapi-types.ts'], config: contracts },
    'generated/routes.ts': { plugins: ['./codegen/plugins/routes.ts'], config: contracts },
    'generated/policy.ts': { plugins: ['./codegen/plugins/policy.ts'], config: contracts },
    'generated/client.ts': { plugins: ['./codegen/plugins/client.ts'], config: contracts },
    'generated/openapi.json': { plugins: ['./codegen/plugins/published-spec.ts'], config: contracts },
    'generated/gateway-policy.json': { plugins: ['./codegen/plugins/gateway-policy.ts'], config: contracts },
    'generated/access.md': { plugins: ['./codegen/plugins/access-matrix.ts'], config: contracts },
  },
  hooks: { afterAllFileWrite: rejectUnknownOutputs },
};

export default config;
