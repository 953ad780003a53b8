import fastJsonStringify from 'fast-json-stringify';
import type { FastifySerializerCompiler } from 'fastify';
import { sharedSchemas } from '../../generated/routes.js';

type Serialize = (data: unknown) => string;

const cache = new WeakMap<object, Serialize>();

// The schemas response schemas refer to (`{ $ref: 'Error#' }`), by `$id`.
const external = Object.fromEntries(sharedSchemas.map((schema) => [schema.$id as string, schema]));

/**
 * Serialisers compiled from the contract's response schemas: properties outside the contract are never
 * sent. The same function renders a resource for its ETag, so If-Match compares like with like.
 */
export function serializerFor(schema: object): Serialize {
  let serialize = cache.get(schema);
  if (!serialize) {
    serialize = fastJsonStringify(schema as never, { schema: external as never }) as Serialize;
    cache.set(schema, serialize);
  }
  return serialize;
}

export const serializerCompiler: FastifySerializerCompiler<unknown> = ({ schema }) => {
  const serialize = serializerFor(schema as object);
  return (data) => (typeof data === 'string' ? data : serialize(data));
};
