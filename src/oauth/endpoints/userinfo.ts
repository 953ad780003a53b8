import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuditDecision } from '../../audit/audit-event.js';
import { NO_STORE_HEADERS } from '../../errors/oauth-renderer.js';
import { ApiError } from '../../errors/registry.js';
import type { Principal } from '../../policy/principal.js';
import type { Db } from '../../storage/dialect.js';
import { findUserById } from '../../storage/users.js';
import { OAuthError } from '../oauth-error.js';

export interface UserinfoDeps {
  db: Db;
  audit: { record(decision: AuditDecision): void };
  /** The API's own bearer authentication: the same token, subject, client and scope checks as every request. */
  authenticateBearer(authorization: string | undefined): Promise<Principal>;
}

const REALM = 'Bearer realm="portcullis"';

/**
 * GET and POST /oauth/userinfo (OpenID Connect Core §5.3): `sub` and the claims of the granted `profile`
 * (`name`) and `email` (`email`, `email_verified`) scopes, for an access token with `openid`. An ID token
 * is not an access token (its `typ` is JWT), so it is refused like any invalid token.
 */
export function registerUserinfoEndpoint(scope: FastifyInstance, deps: UserinfoDeps): void {
  scope.route({
    method: ['GET', 'POST'],
    url: '/oauth/userinfo',
    handler: async (request, reply) => {
      // Every answer is a decision about the user's claims, recorded as the API's are: a refused token as
      // the address's (aggregated per window, anyone can send one), the rest as the caller's.
      const decided = (decision: Pick<AuditDecision, 'subject' | 'clientId' | 'resourceId' | 'decision' | 'reason'>) =>
        deps.audit.record({ requestId: request.id, interface: 'oauth', operation: 'userinfo', resourceType: 'user', sourceAddress: request.ip, ...decision });
      const principal = await authenticated(request, deps).catch((error: unknown) => {
        if (error instanceof OAuthError) decided({ subject: null, clientId: null, resourceId: null, decision: 'deny', reason: 'authentication' });
        throw error;
      });
      if (principal.kind !== 'user' || !principal.scopes.has('openid')) {
        const caller = principal.kind === 'anonymous' ? { subject: null, clientId: null } : { subject: principal.subject, clientId: principal.clientId };
        decided({ ...caller, resourceId: principal.kind === 'user' ? principal.subject : null, decision: 'deny', reason: 'scope' });
        throw new OAuthError('insufficient_scope', 'The access token must be a user\'s and carry the openid scope.', 403, {
          'www-authenticate': `${REALM}, error="insufficient_scope", scope="openid"`,
        });
      }
      const user = await findUserById(deps.db.kysely, principal.subject);
      if (!user) {
        decided({ subject: null, clientId: principal.clientId, resourceId: null, decision: 'deny', reason: 'authentication' });
        throw invalidToken('The user no longer exists.');
      }
      decided({ subject: user.id, clientId: principal.clientId, resourceId: user.id, decision: 'allow', reason: 'granted' });
      return reply.headers(NO_STORE_HEADERS).send({
        sub: user.id,
        ...(principal.scopes.has('profile') ? { name: user.name } : {}),
        // OpenID Connect Core §5.1: email_verified says whether the address was shown to be the user's. Users
        // have no verification flow (the users table records none), so it never was.
        ...(principal.scopes.has('email') ? { email: user.email, email_verified: false } : {}),
      });
    },
  });
}

async function authenticated(request: FastifyRequest, deps: UserinfoDeps): Promise<Principal> {
  // RFC 6750 §2.2 (a form field) and §2.3 (the query) are not accepted: tokens in bodies and URLs leak.
  if (request.headers.authorization === undefined) throw new OAuthError('invalid_request', 'Send the access token as "Authorization: Bearer <token>".', 401, { 'www-authenticate': REALM });
  try {
    const principal = await deps.authenticateBearer(request.headers.authorization);
    // An Authorization header with no credentials in it (empty) is no token either.
    if (principal.kind === 'anonymous') throw invalidToken('The access token is invalid, expired or revoked.');
    return principal;
  } catch (error) {
    if (error instanceof ApiError && error.code === 'UNAUTHENTICATED') throw invalidToken('The access token is invalid, expired or revoked.');
    throw error;
  }
}

function invalidToken(description: string): OAuthError {
  return new OAuthError('invalid_token', description, 401, { 'www-authenticate': `${REALM}, error="invalid_token"` });
}
