import { codegen } from '@graphql-codegen/core';
import * as typescriptPlugin from '@graphql-codegen/typescript';
import * as typescriptResolversPlugin from '@graphql-codegen/typescript-resolvers';
import { parse, printSchema, type GraphQLSchema } from 'graphql';
import openapiTS, { astToString } from 'openapi-typescript';
import type { OpenApiDocument } from './json-schema.js';

/** TypeScript types for every path, operation and schema of the REST contract. */
export async function emitOpenApiTypes(doc: OpenApiDocument): Promise<string> {
  const ast = await openapiTS(structuredClone(doc) as never, { alphabetize: false });
  return astToString(ast);
}

/** Resolver and schema types for the GraphQL contract. */
export async function emitGraphqlTypes(schema: GraphQLSchema): Promise<string> {
  // Only the parsed document crosses over: the plugins build their schema with their own graphql module.
  return codegen({
    filename: 'generated/graphql.ts',
    schema: parse(printSchema(schema)),
    documents: [],
    config: {
      useTypeImports: true,
      scalars: { DateTime: 'string' },
      enumsAsTypes: true,
      contextType: '../src/graphql/context.js#GraphqlContext',
    },
    plugins: [{ typescript: {} }, { typescriptResolvers: {} }],
    pluginMap: { typescript: typescriptPlugin, typescriptResolvers: typescriptResolversPlugin },
  });
}
