import type { FastifyInstance } from 'fastify';
import { JWKS_MAX_AGE_SECONDS, type KeyStore } from '../keys/key-store.js';

export interface JwksDeps {
  keys: KeyStore;
}

/**
 * A client may keep the JWKS for less time than a new key is published before it signs, and than a retired
 * key stays published (key-store.ts): a copy that is as old as it may be holds every key a live token needs.
 */
export const JWKS_CACHE_CONTROL = `public, max-age=${JWKS_MAX_AGE_SECONDS}`;

/**
 * The public signing keys, at /oauth/jwks (the metadata's `jwks_uri`) and /.well-known/jwks.json: the keys
 * waiting to sign, the signing ones, and retired ones until their tokens have expired. A resource server
 * meeting an unknown kid may refetch too, as RFC 7517 §4.5 intends.
 */
export function registerJwks(scope: FastifyInstance, deps: JwksDeps): void {
  for (const url of ['/oauth/jwks', '/.well-known/jwks.json']) {
    scope.get(url, async (_request, reply) =>
      reply
        .header('Cache-Control', JWKS_CACHE_CONTROL)
        // RFC 7517 §8.5: the registered media type of a JWK Set.
        .type('application/jwk-set+json')
        .send(await deps.keys.publicJwks()),
    );
  }
}
