import type { FastifyInstance } from 'fastify';
import { NO_STORE_HEADERS } from '../../errors/oauth-renderer.js';
import type { ClientRecord } from '../../storage/clients.js';
import type { Db } from '../../storage/dialect.js';
import { authenticateClient } from '../client-auth.js';
import { CLIENT_CREDENTIALS, grantClientCredentials } from '../grants/client-credentials.js';
import { OAuthError } from '../oauth-error.js';
import type { IssuedAccessToken, TokenService } from '../tokens/token-service.js';

export interface TokenEndpointDeps {
  db: Db;
  tokens: TokenService;
}

type FormParams = Readonly<Record<string, string>>;
type GrantHandler = (client: ClientRecord, params: FormParams, deps: TokenEndpointDeps) => Promise<IssuedAccessToken>;

/** The grants this server implements, by `grant_type` (RFC 6749 §4). Discovery lists the same keys. */
const GRANTS: Readonly<Record<string, GrantHandler>> = {
  [CLIENT_CREDENTIALS]: (client, params, deps) =>
    deps.tokens.issueAccessToken({ client, ...grantClientCredentials(client, params), grantType: CLIENT_CREDENTIALS }),
};

export const SUPPORTED_GRANT_TYPES: readonly string[] = Object.freeze(Object.keys(GRANTS));

/** POST /oauth/token (RFC 6749 §3.2): authenticate the client, run its grant, answer per §5.1. */
export function registerTokenEndpoint(scope: FastifyInstance, deps: TokenEndpointDeps): void {
  scope.post('/oauth/token', async (request, reply) => {
    const params = readFormParams(request.body);
    const grantType = params.grant_type;
    if (grantType === undefined) throw new OAuthError('invalid_request', 'grant_type is required.');
    const grant = Object.hasOwn(GRANTS, grantType) ? GRANTS[grantType] : undefined;
    if (!grant) throw new OAuthError('unsupported_grant_type', 'The grant_type is not supported by this server.');
    const { client } = await authenticateClient(deps.db.kysely, { authorization: request.headers.authorization, params });
    const issued = await grant(client, params, deps);
    return reply.headers(NO_STORE_HEADERS).send({
      access_token: issued.accessToken,
      token_type: issued.tokenType,
      expires_in: issued.expiresIn,
      scope: issued.scope,
    });
  });
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
