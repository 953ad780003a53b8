import type { FastifyInstance } from 'fastify';
import { NO_STORE_HEADERS } from '../../errors/oauth-renderer.js';
import type { ClientRecord } from '../../storage/clients.js';
import { grantReadStore } from '../../storage/grant-store.js';
import { OAuthError } from '../oauth-error.js';
import { LOOKUP_TOKEN, tokenLookupKey } from '../secrets.js';
import { revokeGrant } from '../tokens/access-token-records.js';
import { isInvalidTokenError } from '../tokens/invalid-token-error.js';
import { lockUserForRevocation } from '../../storage/row-locks.js';
import { authenticateAudited, readFormParams, type RecordDecision, type TokenEndpointDeps } from './token.js';

/** What a revocation ended: the subject it spoke for and the grant or token. */
interface Revoked {
  subject: string;
  resourceType: 'grant' | 'token';
  resourceId: string;
}

/**
 * POST /oauth/revoke (RFC 7009): the client that holds an access or refresh token ends it. The client
 * authenticates as at the token endpoint. Every other outcome — a string that is no token, a token that
 * expired or was revoked, another client's token — gets the same empty 200 (§2.2), so the endpoint is no
 * oracle for which strings are live tokens or whose they are; another client's token is left alone.
 * Revocation marks the token's row (a self-contained JWT's is listed by jti) and records an invalidation:
 * every instance refuses it within a second, every string of it included (both encodings of an ECDSA
 * signature).
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
    const revoked = await revokeHeldToken(deps, client, token);
    if (revoked) {
      decided({ subject: revoked.subject, clientId: client.clientId, resourceType: revoked.resourceType, resourceId: revoked.resourceId, decision: 'allow', reason: 'granted' });
    } else {
      // Nothing of this client's was named. A public client authenticates with its client_id alone, so
      // anyone can send these: with no subject they are counted per address and window like refused
      // credentials (audit-log.ts), not written one row per request.
      decided({ subject: null, clientId: client.clientId, resourceType: 'token', resourceId: null, decision: 'deny', reason: 'resource' });
    }
    return reply.headers(NO_STORE_HEADERS).send();
  });
}

/** Ends the token if it is a live one of this client registration; null (and no write) for anything else. */
async function revokeHeldToken(deps: TokenEndpointDeps, client: ClientRecord, token: string): Promise<Revoked | null> {
  // A refresh token ends its whole grant: the family and every access token issued from it (§2.1).
  const refresh = LOOKUP_TOKEN.test(token) ? await grantReadStore(deps.db).findRefreshToken(tokenLookupKey(token)) : null;
  if (refresh) {
    if (refresh.clientRegistrationId !== client.id) return null;
    // Under the user's lock: a refresh of this family in progress commits first, and its new tokens end too.
    await deps.db.kysely.transaction().execute(async (trx) => {
      await lockUserForRevocation(trx, refresh.userId);
      await revokeGrant(trx, refresh.familyId, new Date().toISOString());
    });
    deps.tokens.evictGrant(refresh.familyId);
    return { subject: refresh.userId, resourceType: 'grant', resourceId: refresh.familyId };
  }
  let verified;
  try {
    verified = await deps.tokens.verifyAccessToken(token);
  } catch (error) {
    if (isInvalidTokenError(error)) return null;
    throw error;
  }
  if (verified.clientId !== client.clientId || verified.clientRegistrationId !== client.id) return null;
  // A self-contained token issued before its client's tokens were revoked is revoked already: nothing to list.
  // (One issued under a later count than the registration this process holds is live: it is revoked.)
  if (verified.clientRevocations !== null && verified.clientRevocations < client.revocations) return null;
  await deps.tokens.revokeToken(verified);
  return { subject: verified.subject, resourceType: 'token', resourceId: verified.jti };
}
