import type { PluginFunction } from '@graphql-codegen/plugin-helpers';
import openapiTS, { astToString } from 'openapi-typescript';
import { BANNER, loadContracts, type ContractPluginConfig } from '../contract-plugin.js';
import { publishSpec } from '../publish-spec.js';

/**
 * generated/client.ts: a typed client of the REST API — openapi-typescript's types of the published contract
 * (what GET /v1/rest serves) with openapi-fetch. Unlike generated/openapi.d.ts, which types the server's
 * handlers after validation has filled in defaults, a property with a default is optional here, as it is for
 * a caller (`defaultNonNullable: false`).
 */
export const plugin: PluginFunction<ContractPluginConfig> = async (schema, _documents, config) => {
  const { doc } = loadContracts(schema, config);
  const types = astToString(await openapiTS(publishSpec(doc) as never, { alphabetize: false, defaultNonNullable: false }));
  return (
    BANNER +
    `import createClient, { type Client, type ClientOptions } from 'openapi-fetch';\n\n` +
    `/** A client of ${JSON.stringify(`${doc.info.title} ${doc.info.version}`)}. */\n` +
    `export type PortcullisClient = Client<paths>;\n\n` +
    `/** \`baseUrl\` is the server's public URL (its ISSUER), without /v1: the paths carry it. */\n` +
    `export function createPortcullisClient(options: ClientOptions & { baseUrl: string }): PortcullisClient {\n` +
    `  return createClient<paths>(options);\n` +
    `}\n\n` +
    types
  );
};
