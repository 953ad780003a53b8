import type { FastifyInstance } from 'fastify';
import type { Config } from '../../config/config.js';
import { PKCE_METHOD } from '../pkce.js';
import { supportedGrantTypes } from './token.js';

export interface DiscoveryDeps {
  config: Config;
  scopes: readonly string[];
}

export const METADATA_CACHE_CONTROL = 'public, max-age=300';

/** Claims an ID token or the userinfo response can carry (OpenID Connect Discovery §3 `claims_supported`). */
export const CLAIMS_SUPPORTED = ['sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'at_hash', 'name', 'email', 'email_verified'];

const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'];

/**
 * RFC 8414 §2 authorization server metadata, which is also the OpenID Connect Discovery 1.0 §3 provider
 * metadata: one document, served at both well-known addresses, listing exactly what this server does.
 */
export function buildMetadata(deps: DiscoveryDeps): Record<string, unknown> {
  const { issuer } = deps.config;
  return {
    issuer,
    authorization_endpoint: `${issuer}/oauth/authorize`,
    token_endpoint: `${issuer}/oauth/token`,
    userinfo_endpoint: `${issuer}/oauth/userinfo`,
    jwks_uri: `${issuer}/oauth/jwks`,
    device_authorization_endpoint: `${issuer}/oauth/device_authorization`,
    revocation_endpoint: `${issuer}/oauth/revoke`,
    introspection_endpoint: `${issuer}/oauth/introspect`,
    end_session_endpoint: `${issuer}/oauth/logout`,
    scopes_supported: [...deps.scopes],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: supportedGrantTypes(deps.config),
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256', 'ES256'],
    code_challenge_methods_supported: [PKCE_METHOD],
    // A public client names itself with client_id alone (RFC 6749 §2.3, RFC 8414 §2).
    token_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS, 'none'],
    revocation_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS, 'none'],
    // RFC 7662 §2.1: introspection is for confidential clients (resource servers) only.
    introspection_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    claims_supported: CLAIMS_SUPPORTED,
    prompt_values_supported: ['none', 'login', 'consent'],
    // RFC 9207: every authorization response carries `iss`.
    authorization_response_iss_parameter_supported: true,
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
    claims_parameter_supported: false,
  };
}

/** GET /.well-known/oauth-authorization-server (RFC 8414 §3) and /.well-known/openid-configuration (OpenID Connect Discovery §4). */
export function registerDiscovery(scope: FastifyInstance, deps: DiscoveryDeps): void {
  const metadata = buildMetadata(deps);
  for (const url of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
    scope.get(url, async (_request, reply) => reply.header('Cache-Control', METADATA_CACHE_CONTROL).send(metadata));
  }
}
