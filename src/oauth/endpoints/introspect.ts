import type { FastifyInstance } from 'fastify';
import { NO_STORE_HEADERS } from '../../errors/oauth-renderer.js';
import { ApiError } from '../../errors/registry.js';
import type { Principal } from '../../policy/principal.js';
import type { ClientRecord } from '../../storage/clients.js';
import { grantReadStore } from '../../storage/grant-store.js';
import { findUserById } from '../../storage/users.js';
import { refreshTokenEnds } from '../grants/refresh-token.js';
import { OAuthError } from '../oauth-error.js';
import { LOOKUP_TOKEN, tokenLookupKey } from '../secrets.js';
import { REFRESH_TOKEN } from '../tokens/user-tokens.js';
import { authenticateAudited, readFormParams, type RecordDecision, type TokenEndpointDeps } from './token.js';

export interface IntrospectionDeps extends TokenEndpointDeps {
  authenticateBearer(authorization: string | undefined): Promise<Principal>;
}

const INACTIVE = { active: false };

/**
 * POST /oauth/introspect (RFC 7662) for confidential clients only (§2.1: the endpoint must be protected;
 * a public client has no credential to protect it with). A client learns about the tokens issued to it
 * and nothing else: any other token, and every invalid, expired, revoked or rotated one, is
 * `{"active": false}` (§2.2), so the endpoint cannot be used to test stolen strings.
 */
export function registerIntrospectionEndpoint(scope: FastifyInstance, deps: IntrospectionDeps): void {
  scope.post('/oauth/introspect', async (request, reply) => {
    const params = readFormParams(request.body);
    if (params.token === undefined) throw new OAuthError('invalid_request', 'token is required.');
    const decided: RecordDecision = (decision) =>
      deps.audit.record({ requestId: request.id, interface: 'oauth', operation: 'introspect', sourceAddress: request.ip, ...decision });
    const { client, method } = await authenticateAudited(deps, request.headers.authorization, params, decided);
    if (method === 'none') {
      // A client_id alone proves nothing: refused as a client that failed to authenticate.
      decided({ subject: null, clientId: client.clientId, resourceType: null, resourceId: null, decision: 'deny', reason: 'authentication' });
      throw new OAuthError('invalid_client', 'Introspection is for confidential clients.', 401, { 'WWW-Authenticate': 'Basic realm="portcullis"' });
    }
    const hintRefresh = params.token_type_hint === 'refresh_token';
    const answer = hintRefresh
      ? ((await describeRefreshToken(deps, client, params.token)) ?? (await describeAccessToken(deps, client, params.token)))
      : ((await describeAccessToken(deps, client, params.token)) ?? (await describeRefreshToken(deps, client, params.token)));
    decided({ subject: null, clientId: client.clientId, resourceType: 'token', resourceId: null, decision: 'allow', reason: 'granted' });
    return reply.headers(NO_STORE_HEADERS).send(answer ?? INACTIVE);
  });
}

async function describeAccessToken(deps: IntrospectionDeps, client: ClientRecord, token: string): Promise<Record<string, unknown> | null> {
  let principal: Principal;
  try {
    principal = await deps.authenticateBearer(`Bearer ${token}`);
  } catch (error) {
    if (error instanceof ApiError && (error.code === 'UNAUTHENTICATED' || error.code === 'VALIDATION_FAILED')) return null;
    throw error;
  }
  if (principal.kind === 'anonymous' || principal.clientId !== client.clientId) return null;
  return {
    active: true,
    scope: [...principal.scopes].join(' '),
    client_id: principal.clientId,
    sub: principal.subject,
    token_type: 'Bearer',
    exp: principal.token.expiresAt,
    iat: principal.token.issuedAt,
    iss: deps.config.issuer,
    aud: deps.config.issuer,
    jti: principal.token.jti,
  };
}

async function describeRefreshToken(deps: IntrospectionDeps, client: ClientRecord, token: string): Promise<Record<string, unknown> | null> {
  if (!LOOKUP_TOKEN.test(token)) return null;
  const row = await grantReadStore(deps.db).findRefreshToken(tokenLookupKey(token));
  const now = (deps.clock ?? Date.now)();
  // Active only while the grant would accept it: the client still holds the refresh_token grant, and the
  // token has neither expired nor outlived its family's maximum lifetime.
  if (!row || row.clientRegistrationId !== client.id || row.revokedAt !== null || row.rotatedAt !== null || !client.grantTypes.includes(REFRESH_TOKEN)) return null;
  const ends = refreshTokenEnds(row, deps.config.tokens.refreshTokenMaxLifetime);
  if (ends <= now) return null;
  const user = await findUserById(deps.db.kysely, row.userId);
  if (!user || !user.active) return null;
  return {
    active: true,
    scope: row.scopes.split(' ').filter((scope) => client.scopes.includes(scope)).join(' '),
    client_id: row.clientId,
    sub: row.userId,
    // No token_type: RFC 7662 §2.2 takes its values from the access token types (RFC 6749 §7.1), and a
    // refresh token is none of them.
    exp: Math.floor(ends / 1000),
    iat: Math.floor(Date.parse(row.issuedAt) / 1000),
    iss: deps.config.issuer,
  };
}
