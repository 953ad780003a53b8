import type { FastifyInstance } from 'fastify';
import type { KeyStore } from '../keys/key-store.js';
import { METADATA_CACHE_CONTROL } from './discovery.js';

export interface JwksDeps {
  keys: KeyStore;
}

/**
 * The public signing keys, at /oauth/jwks (the metadata's `jwks_uri`) and /.well-known/jwks.json.
 * A retired key stays listed until its tokens have expired, so a cached copy never lacks a key that a
 * live token needs; a resource server meeting a new kid refetches, as RFC 7517 §4.5 intends.
 */
export function registerJwks(scope: FastifyInstance, deps: JwksDeps): void {
  for (const url of ['/oauth/jwks', '/.well-known/jwks.json']) {
    scope.get(url, async (_request, reply) =>
      reply
        .header('Cache-Control', METADATA_CACHE_CONTROL)
        // RFC 7517 §8.5: the registered media type of a JWK Set.
        .type('application/jwk-set+json')
        .send(await deps.keys.publicJwks()),
    );
  }
}
