import type { FastifyInstance } from 'fastify';
import { auditableClientId, type AuditDecision } from '../../audit/audit-event.js';
import { NO_STORE_HEADERS } from '../../errors/oauth-renderer.js';
import type { ClientRecord } from '../../storage/clients.js';
import type { Db } from '../../storage/dialect.js';
import { authenticateClient, presentedClientId, type AuthenticatedClient } from '../client-auth.js';
import { CLIENT_CREDENTIALS, grantClientCredentials } from '../grants/client-credentials.js';
import { OAuthError, type OAuthErrorCode } from '../oauth-error.js';
import type { IssuedAccessToken, TokenService } from '../tokens/token-service.js';
import type { Config } from '../../config/config.js';
import { SERVED_GRANT_TYPES, type ServedGrantType } from '../grant-types.js';
import type { SignInThrottle } from '../../limits/sign-in-throttle.js';
import type { KeyStore } from '../keys/key-store.js';
import { AUTHORIZATION_CODE } from '../authorize/authorization-request.js';
import { grantAuthorizationCode } from '../grants/authorization-code.js';
import { GrantReuseError } from '../grants/grant-reuse-error.js';
import { grantPassword, PASSWORD } from '../grants/password.js';
import { grantDeviceCode } from '../grants/device-code.js';
import { DEVICE_CODE } from '../device/device-authorization.js';
import { grantRefreshToken } from '../grants/refresh-token.js';
import { REFRESH_TOKEN, signUserTokens, type UserTokenDeps } from '../tokens/user-tokens.js';
import { commitUserGrant, RegistrationChangedError, type CheckedGrant } from '../grants/grant-commit.js';
import type { RegisteredClients } from '../registered-clients.js';
import { StaleRegistrationError } from '../../storage/turn-batch.js';

export interface TokenEndpointDeps {
  db: Db;
  /** Client registrations held in memory, dropped on every change (registered-clients.ts). */
  clients: RegisteredClients;
  tokens: TokenService;
  audit: { record(decision: AuditDecision): void };
  keys: KeyStore;
  config: Config;
  throttle: SignInThrottle;
  clock?: () => number;
  /** Tests only: awaited once a user grant is checked and its tokens signed, before its transaction (grant-commit.ts). */
  beforeGrantCommit?: () => Promise<void>;
  /** Tests only: awaited inside the grant's transaction, with the locks held and the code or token used, before the tokens are stored. */
  duringGrantCommit?: () => Promise<void>;
}

type FormParams = Readonly<Record<string, string>>;

interface GrantRequest {
  client: ClientRecord;
  params: FormParams;
  deps: TokenEndpointDeps;
  address: string;
  now: number;
}

/** What a grant issued: the token response's members, and for the audit record whom it speaks for. */
interface Issued {
  access: IssuedAccessToken;
  refreshToken: string | null;
  idToken: string | null;
  /** The client itself, or the user who granted it. */
  subject: string;
}

function userTokenDeps(deps: TokenEndpointDeps): UserTokenDeps {
  return {
    db: deps.db.kysely,
    tokens: deps.tokens,
    keys: deps.keys,
    issuer: deps.config.issuer,
    refreshTokenTtl: deps.config.tokens.refreshTokenTtl,
    refreshTokenMaxLifetime: deps.config.tokens.refreshTokenMaxLifetime,
    clock: deps.clock,
  };
}

async function issueFor(deps: TokenEndpointDeps, grant: CheckedGrant): Promise<Issued> {
  const { tokens: issued, rows } = await signUserTokens(userTokenDeps(deps), grant);
  await deps.beforeGrantCommit?.();
  await commitUserGrant(deps.tokens, grant, rows, deps.duringGrantCommit);
  return { ...issued, subject: grant.userId };
}

/** The grants this server implements, by `grant_type` (RFC 6749 §4, RFC 8628 §3.4). Discovery lists the same keys. */
const GRANTS: Readonly<Record<ServedGrantType, (request: GrantRequest) => Promise<Issued>>> = {
  [AUTHORIZATION_CODE]: async ({ client, params, deps, now }) => issueFor(deps, await grantAuthorizationCode(deps.db.kysely, client, params, now)),
  [REFRESH_TOKEN]: async ({ client, params, deps, now }) => issueFor(deps, await grantRefreshToken(deps.db, client, params, now, deps.config.tokens.refreshTokenMaxLifetime)),
  [CLIENT_CREDENTIALS]: async ({ client, params, deps }) => {
    const grant = grantClientCredentials(client, params);
    const access = await deps.tokens.issueAccessToken({ client, ...grant, grantType: CLIENT_CREDENTIALS }).catch((error: unknown) => {
      // Authenticated against a registration that changed meanwhile (a secret rotated after a leak): no token.
      throw error instanceof StaleRegistrationError ? new RegistrationChangedError() : error;
    });
    return { access, refreshToken: null, idToken: null, subject: grant.subject };
  },
  [DEVICE_CODE]: async ({ client, params, deps, now }) => issueFor(deps, await grantDeviceCode(deps.db.kysely, client, params, now)),
  [PASSWORD]: async ({ client, params, deps, address, now }) => {
    const context = { db: deps.db.kysely, enabled: deps.config.signIn.passwordGrant, throttle: deps.throttle, address, now };
    return issueFor(deps, await grantPassword(context, client, params));
  },
};

/** The grant's refusals that are authorization decisions, with the check that decided (audit `reason`). */
const REFUSALS: Readonly<Partial<Record<OAuthErrorCode, AuditDecision['reason']>>> = {
  unauthorized_client: 'grant',
  invalid_scope: 'scope',
  invalid_grant: 'grant',
};

const supportedByConfig = new WeakMap<Config, readonly ServedGrantType[]>();

/** Grant types a client can use here; the password grant only when the server enables it. */
export function supportedGrantTypes(config: Config): readonly ServedGrantType[] {
  let supported = supportedByConfig.get(config);
  if (!supported) {
    supported = Object.freeze(SERVED_GRANT_TYPES.filter((grantType) => grantType !== PASSWORD || config.signIn.passwordGrant));
    supportedByConfig.set(config, supported);
  }
  return supported;
}

export type RecordDecision = (decision: Omit<AuditDecision, 'requestId' | 'interface' | 'operation'>) => void;

/**
 * Client authentication at an OAuth endpoint (RFC 6749 §2.3), its failure recorded as a decision. A client_id
 * that names no registered client is not recorded at all: callers swap id and secret (the secret would land
 * in the log), and one value per request would make each its own aggregate.
 */
export async function authenticateAudited(
  deps: TokenEndpointDeps,
  authorization: string | undefined,
  params: FormParams,
  decided: RecordDecision,
): Promise<AuthenticatedClient> {
  const credentials = { authorization, params };
  try {
    return await authenticateClient((clientId) => deps.clients.find(clientId), credentials);
  } catch (error) {
    if (error instanceof OAuthError && error.error === 'invalid_client') {
      const presented = presentedClientId(credentials);
      const registered = presented !== null && (await deps.clients.find(presented)) !== null;
      const clientId = registered ? auditableClientId(presented) : null;
      decided({ subject: null, clientId, resourceType: null, resourceId: null, decision: 'deny', reason: 'authentication' });
    }
    throw error;
  }
}

/** POST /oauth/token (RFC 6749 §3.2): authenticate the client, run its grant, answer per §5.1. */
export function registerTokenEndpoint(scope: FastifyInstance, deps: TokenEndpointDeps): void {
  scope.post('/oauth/token', async (request, reply) => {
    const params = readFormParams(request.body);
    const grantType = params.grant_type;
    // Malformed requests end below without a decision; from there on each request is allowed or refused, and
    // the audit log records which (seed, Authorization rule 8), never with a secret or the token itself.
    const decided: RecordDecision = (decision) =>
      deps.audit.record({ requestId: request.id, interface: 'oauth', operation: 'token', sourceAddress: request.ip, ...decision });
    if (grantType === undefined) throw new OAuthError('invalid_request', 'grant_type is required.');
    const grant = (supportedGrantTypes(deps.config) as readonly string[]).includes(grantType) ? GRANTS[grantType as ServedGrantType] : undefined;
    if (!grant) throw await unsupportedGrantType(deps, grantType, request.headers.authorization, params, decided);
    let { client } = await authenticateAudited(deps, request.headers.authorization, params, decided);
    let issued: Issued;
    try {
      try {
        issued = await grant({ client, params, deps, address: request.ip, now: (deps.clock ?? Date.now)() });
      } catch (error) {
        if (!(error instanceof RegistrationChangedError) || grantType !== CLIENT_CREDENTIALS) throw error;
        // Client credentials use nothing up: authenticated against a registration this process held and
        // that has changed since (a secret rotated, scopes narrowed), the request is taken once more against
        // the registration as it is now — a rotated secret then gets invalid_client.
        deps.clients.forget(client.clientId);
        ({ client } = await authenticateAudited(deps, request.headers.authorization, params, decided));
        issued = await grant({ client, params, deps, address: request.ip, now: (deps.clock ?? Date.now)() });
      }
    } catch (error) {
      // The registration this process holds may be the stale one: the retry the answer asks for reads it anew.
      if (error instanceof RegistrationChangedError) deps.clients.forget(client.clientId);
      if (error instanceof GrantReuseError) {
        // The rows are revoked; what this process verified and cached of the grant must go now too, not
        // when the invalidation feed comes round (the revocation endpoint evicts at once the same way). A
        // replay of a grant ended before ended nothing now: that revocation's invalidation covers the caches.
        if (error.revoked) deps.tokens.evictGrant(error.grantId);
        decided({ subject: error.userId, clientId: client.clientId, resourceType: 'grant', resourceId: error.grantId, decision: 'deny', reason: 'reuse' });
      } else {
        const reason = error instanceof OAuthError ? REFUSALS[error.error] : undefined;
        if (reason) decided({ subject: null, clientId: client.clientId, resourceType: null, resourceId: null, decision: 'deny', reason });
      }
      throw error;
    }
    const { access } = issued;
    decided({
      subject: issued.subject,
      clientId: client.clientId,
      resourceType: 'token',
      resourceId: access.jti,
      decision: 'allow',
      reason: 'granted',
      scopes: access.scope || null,
    });
    return reply.headers(NO_STORE_HEADERS).send({
      access_token: access.accessToken,
      token_type: access.tokenType,
      expires_in: access.expiresIn,
      scope: access.scope,
      ...(issued.refreshToken === null ? {} : { refresh_token: issued.refreshToken }),
      ...(issued.idToken === null ? {} : { id_token: issued.idToken }),
    });
  });
}

/**
 * The answer to a grant type this server does not serve. The password grant is one it can serve: while
 * OAUTH_PASSWORD_GRANT disables it, a legacy client registered for it is told so (it authenticates first,
 * failures recorded as at any grant), so that its operators know what to change; anyone else learns nothing
 * about the server's settings.
 */
async function unsupportedGrantType(
  deps: TokenEndpointDeps,
  grantType: string,
  authorization: string | undefined,
  params: FormParams,
  decided: RecordDecision,
): Promise<OAuthError> {
  const unsupported = new OAuthError('unsupported_grant_type', 'The grant_type is not supported by this server.');
  if (grantType !== PASSWORD) return unsupported;
  let client: ClientRecord;
  try {
    ({ client } = await authenticateAudited(deps, authorization, params, decided));
  } catch (error) {
    if (error instanceof OAuthError) return unsupported;
    throw error;
  }
  decided({ subject: null, clientId: client.clientId, resourceType: null, resourceId: null, decision: 'deny', reason: 'grant' });
  if (!client.legacy || !client.grantTypes.includes(PASSWORD)) return unsupported;
  return new OAuthError('unsupported_grant_type', 'This server has the password grant disabled (operators enable it with OAUTH_PASSWORD_GRANT=enabled).');
}

/**
 * RFC 6749 §3.2: the request is `application/x-www-form-urlencoded` (the scope's only body parser yields a
 * URLSearchParams; anything else never reaches here with one). Parameters sent without a value count as
 * omitted, and a parameter included more than once makes the request invalid (§3.1, §3.2).
 */
export function readFormParams(body: unknown): FormParams {
  if (!(body instanceof URLSearchParams)) {
    throw new OAuthError('invalid_request', 'The request body must be application/x-www-form-urlencoded.');
  }
  const params: Record<string, string> = Object.create(null) as Record<string, string>;
  const seen = new Set<string>();
  for (const [name, value] of body) {
    if (seen.has(name)) throw new OAuthError('invalid_request', `The ${name} parameter is repeated.`);
    seen.add(name);
    if (value !== '') params[name] = value;
  }
  return params;
}
