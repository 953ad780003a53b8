import type { FastifyInstance } from 'fastify';
import { NO_STORE_HEADERS } from '../../errors/oauth-renderer.js';
import { startDeviceAuthorization } from '../device/device-authorization.js';
import { OAuthError } from '../oauth-error.js';
import { authenticateAudited, readFormParams, type RecordDecision, type TokenEndpointDeps } from './token.js';

/** POST /oauth/device_authorization (RFC 8628 §3.1): the client authenticates as at the token endpoint. */
export function registerDeviceAuthorizationEndpoint(scope: FastifyInstance, deps: TokenEndpointDeps): void {
  scope.post('/oauth/device_authorization', async (request, reply) => {
    const params = readFormParams(request.body);
    const decided: RecordDecision = (decision) =>
      deps.audit.record({ requestId: request.id, interface: 'oauth', operation: 'device_authorization', sourceAddress: request.ip, ...decision });
    const { client } = await authenticateAudited(deps, request.headers.authorization, params, decided);
    try {
      const { grantId, scopes, ...started } = await startDeviceAuthorization(deps.db.kysely, deps.config.issuer, client, params.scope, request.ip, deps.clock ?? Date.now);
      // The grant a device code starts, like a token issued at the token endpoint: one event per code. An
      // anonymous caller's codes are bounded per address and per client (device-authorization.ts).
      decided({ subject: null, clientId: client.clientId, resourceType: 'grant', resourceId: grantId, decision: 'allow', reason: 'granted', scopes });
      return reply.headers(NO_STORE_HEADERS).send(started);
    } catch (error) {
      if (error instanceof OAuthError && (error.error === 'unauthorized_client' || error.error === 'invalid_scope')) {
        decided({ subject: null, clientId: client.clientId, resourceType: null, resourceId: null, decision: 'deny', reason: error.error === 'invalid_scope' ? 'scope' : 'grant' });
      }
      throw error;
    }
  });
}
