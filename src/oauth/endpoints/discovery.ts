import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config/config.js';
import { SUPPORTED_GRANT_TYPES } from './token.js';

export interface DiscoveryDeps {
  config: Config;
  scopes: readonly string[];
}

export const METADATA_CACHE_CONTROL = 'public, max-age=300';

/**
 * RFC 8414 §2 authorization server metadata, listing only what this server implements today.
 * `authorization_endpoint` is left out: §2 requires it only when a supported grant type uses it, and none
 * does yet. `response_types_supported` is REQUIRED by §2 with no such exception, so it is present and
 * empty — truthfully, no response type is supported until an authorization endpoint exists.
 */
export function buildMetadata(deps: DiscoveryDeps): Record<string, unknown> {
  const { issuer } = deps.config;
  return {
    issuer,
    token_endpoint: `${issuer}/oauth/token`,
    jwks_uri: `${issuer}/oauth/jwks`,
    scopes_supported: [...deps.scopes],
    response_types_supported: [],
    grant_types_supported: [...SUPPORTED_GRANT_TYPES],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    revocation_endpoint: `${issuer}/oauth/revoke`,
    // A public client names itself with client_id alone (RFC 7009 §2.1, RFC 8414 §2).
    revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
  };
}

/** GET /.well-known/oauth-authorization-server (RFC 8414 §3). */
export function registerDiscovery(scope: FastifyInstance, deps: DiscoveryDeps): void {
  const metadata = buildMetadata(deps);
  scope.get('/.well-known/oauth-authorization-server', async (_request, reply) =>
    reply.header('Cache-Control', METADATA_CACHE_CONTROL).send(metadata),
  );
}
