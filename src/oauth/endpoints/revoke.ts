import type { FastifyInstance } from 'fastify';
import { NO_STORE_HEADERS } from '../../errors/oauth-renderer.js';
import { OAuthError } from '../oauth-error.js';
import { isInvalidTokenError } from '../tokens/invalid-token-error.js';
import { findRefreshToken } from '../../storage/refresh-tokens.js';
import { digestSecret } from '../secrets.js';
import { revokeGrant } from '../tokens/access-token-records.js';
import { lockUserForRevocation } from '../../storage/row-locks.js';

const REFRESH_TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;
import { authenticateAudited, readFormParams, type RecordDecision, type TokenEndpointDeps } from './token.js';

/**
 * POST /oauth/revoke (RFC 7009): the client that holds an access or refresh token ends it. The client authenticates as at the
 * token endpoint; a token it was not issued is refused (§2.1); a token that is unknown, expired or already
 * revoked is answered 200 like a revoked one (§2.2), so the endpoint tells nobody which strings were tokens.
 * Revocation marks the token's row and records an invalidation: every instance refuses it within a second,
 * every string of it included (both encodings of an ECDSA signature).
 */
export function registerRevocationEndpoint(scope: FastifyInstance, deps: TokenEndpointDeps): void {
  scope.post('/oauth/revoke', async (request, reply) => {
    const params = readFormParams(request.body);
    const token = params.token;
    if (token === undefined || token === '') throw new OAuthError('invalid_request', 'token is required.');
    // `token_type_hint` is only a hint (§2.1: a server searches all its token types anyway).
    const decided: RecordDecision = (decision) =>
      deps.audit.record({ requestId: request.id, interface: 'oauth', operation: 'revoke', sourceAddress: request.ip, ...decision });
    const { client } = await authenticateAudited(deps, request.headers.authorization, params, decided);
    // A refresh token ends its whole grant: the family and every access token issued from it (§2.1).
    const refresh = REFRESH_TOKEN_SHAPE.test(token) ? await findRefreshToken(deps.db.kysely, digestSecret(token)) : null;
    if (refresh) {
      if (refresh.clientRegistrationId !== client.id) {
        decided({ subject: null, clientId: client.clientId, resourceType: 'grant', resourceId: null, decision: 'deny', reason: 'resource' });
        throw new OAuthError('unauthorized_client', 'The token was not issued to this client.');
      }
      // Under the user's lock: a refresh of this family in progress commits first, and its new tokens end too.
      await deps.db.kysely.transaction().execute(async (trx) => {
        await lockUserForRevocation(trx, refresh.userId);
        await revokeGrant(trx, refresh.familyId, new Date().toISOString());
      });
      deps.tokens.evictGrant(refresh.familyId);
      decided({ subject: refresh.userId, clientId: client.clientId, resourceType: 'grant', resourceId: refresh.familyId, decision: 'allow', reason: 'granted' });
      return reply.headers(NO_STORE_HEADERS).send();
    }
    let verified;
    try {
      verified = await deps.tokens.verifyAccessToken(token);
    } catch (error) {
      if (!isInvalidTokenError(error)) throw error;
      decided({ subject: null, clientId: client.clientId, resourceType: 'token', resourceId: null, decision: 'allow', reason: 'granted' });
      return reply.headers(NO_STORE_HEADERS).send();
    }
    if (verified.clientId !== client.clientId || verified.clientRegistrationId !== client.id) {
      decided({ subject: null, clientId: client.clientId, resourceType: 'token', resourceId: verified.jti, decision: 'deny', reason: 'resource' });
      throw new OAuthError('unauthorized_client', 'The token was not issued to this client.');
    }
    await deps.tokens.revokeToken(verified.jti);
    decided({ subject: verified.subject, clientId: client.clientId, resourceType: 'token', resourceId: verified.jti, decision: 'allow', reason: 'granted' });
    return reply.headers(NO_STORE_HEADERS).send();
  });
}
