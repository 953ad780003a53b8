import { ApiError } from '../errors/registry.js';
import { isInvalidTokenError } from '../oauth/tokens/invalid-token-error.js';
import type { TokenService } from '../oauth/tokens/token-service.js';
import { ANONYMOUS, type Principal, type TokenPrincipal } from '../policy/principal.js';
import type { SubjectDirectory, SubjectStatus } from './subject-directory.js';
import type { VerifiedToken } from '../oauth/tokens/verified-token.js';
import type { MaybePromise } from '../policy/maybe-promise.js';
import { bearerChallenge } from './www-authenticate.js';

// RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const BEARER_SCHEME = /^Bearer(?: |$)/i;

export interface AuthenticateDeps {
  tokens: TokenService;
  subjects: SubjectDirectory;
}

export interface AuthenticationInput {
  authorization: string | undefined;
  /** Whether the query string carries `access_token` (RFC 6750 §2.3 is not supported: tokens leak in logs). */
  tokenInQuery: boolean;
  /**
   * The token of the usual `Bearer <token>` form (null: another form), taken from the header once per
   * request: a map hashes a string once, so every cache lookup of the request reuses that hash.
   */
  usualToken?: string | null;
  /**
   * What the cache of verified tokens held for `usualToken` when the address stage looked, for the
   * authentication that runs next in the same turn, which takes it (and clears it) instead of looking again.
   * Never kept longer: an input authenticated again later (a subscription's socket, checked every second)
   * must look again, or a token revoked since would still be taken for valid.
   */
  cachedToken?: VerifiedToken | null;
}

function usualToken(input: AuthenticationInput): string | null {
  if (input.usualToken === undefined) {
    const header = input.authorization;
    input.usualToken = header !== undefined && header.startsWith('Bearer ') ? header.slice(7) : null;
  }
  return input.usualToken;
}

function invalidToken(description: string): ApiError {
  return new ApiError('UNAUTHENTICATED', 'The access token is invalid, expired or revoked.', {
    headers: { 'www-authenticate': bearerChallenge('invalid_token', { error_description: description }) },
  });
}

/**
 * Stage 2: Authorization header -> principal. No header is the anonymous principal; a bad token is 401.
 * A token verified before, whose subject and client were looked up recently, is decided synchronously.
 */
export function authenticate(input: AuthenticationInput, deps: AuthenticateDeps): MaybePromise<Principal> {
  // Taken once: see AuthenticationInput.cachedToken.
  const found = input.cachedToken;
  input.cachedToken = undefined;
  if (input.tokenInQuery) {
    throw new ApiError('VALIDATION_FAILED', 'Send the access token in the Authorization header, not in the URL.', {
      headers: { 'www-authenticate': bearerChallenge('invalid_request') },
      details: [{ path: '/query/access_token', message: 'tokens are accepted only in the Authorization header' }],
    });
  }
  if (input.authorization === undefined || input.authorization === '') return ANONYMOUS;
  // The usual form, "Bearer <token>" with a token verified before, needs no parsing: the cache holds only
  // tokens that matched the grammar below.
  const usual = usualToken(input);
  if (usual !== null) {
    const known = decideCached(found ?? deps.tokens.cachedAccessToken(usual), deps);
    if (known !== undefined) return known;
  }
  const match = BEARER.exec(input.authorization);
  if (!match) {
    // RFC 6750 §3.1: another scheme (Basic, ...) is no Bearer credential at all, so the challenge carries no
    // error code; a Bearer credential that is malformed is an invalid_request.
    const scheme = BEARER_SCHEME.test(input.authorization);
    throw new ApiError('UNAUTHENTICATED', 'Use an Authorization header of the form "Bearer <token>".', {
      headers: { 'www-authenticate': scheme ? bearerChallenge('invalid_request') : bearerChallenge() },
    });
  }
  const token = match[1]!;
  return (token === usual ? undefined : decideCached(deps.tokens.cachedAccessToken(token), deps)) ?? verifyAndLookUp(token, deps);
}

/**
 * Whether the header carries, in the usual form, a token this server has verified and still caches. What it
 * found is kept on the input for `authenticate`, which runs right after, in the same turn, when it is found.
 */
export function hasVerifiedBearer(input: AuthenticationInput, tokens: TokenService): boolean {
  const token = usualToken(input);
  if (token === null) return false;
  input.cachedToken = tokens.cachedAccessToken(token);
  return input.cachedToken !== null;
}

/** The principal a verified token was last decided to be, and the statuses that decided it. */
interface Decided {
  subject: SubjectStatus;
  client: SubjectStatus;
  principal: TokenPrincipal;
}

const decided = new WeakMap<VerifiedToken, Decided>();

/** The principal from caches alone (the token as the cache holds it, its subject and client), or undefined. */
function decideCached(verified: VerifiedToken | null, deps: AuthenticateDeps): Principal | undefined {
  if (verified === null) return undefined;
  const subject = deps.subjects.cached(verified.subjectType, verified.subject);
  const client = verified.subjectType === 'client' ? subject : deps.subjects.cached('client', verified.clientId);
  if (subject === undefined || client === undefined || clientMayBeBehind(verified, client)) return undefined;
  return principalOf(verified, subject, client);
}

/**
 * Whether the client's status held here may predate the token: it names another registration (or none), or
 * a lower revocation count. A client_id registered again, or a token issued under a newer count, is seen by
 * the token endpoint (here or on another instance) before this process's invalidation feed tells it.
 */
function clientMayBeBehind(token: VerifiedToken, client: SubjectStatus | null): boolean {
  return client === null || client.id !== token.clientRegistrationId || (token.clientRevocations !== null && token.clientRevocations > (client.revocations ?? 0));
}

async function verifyAndLookUp(raw: string, deps: AuthenticateDeps): Promise<Principal> {
  let token;
  try {
    token = await deps.tokens.verifyAccessToken(raw);
  } catch (error) {
    if (isInvalidTokenError(error)) throw invalidToken('The access token is not valid');
    throw error;
  }
  let subject = await deps.subjects.lookup(token.subjectType, token.subject);
  let client = token.subjectType === 'client' ? subject : await deps.subjects.lookup('client', token.clientId);
  if (clientMayBeBehind(token, client)) {
    // Read again unless read after the token's issuing second: a token older than the status proves nothing.
    client = await deps.subjects.lookup('client', token.clientId, (token.issuedAt + 1) * 1000);
    if (token.subjectType === 'client') subject = client;
  }
  return principalOf(token, subject, client);
}

/**
 * The principal of a verified token with its subject's and client's statuses. A status read again is a new
 * object, never one changed in place: the same token with the same statuses is the same principal, which is
 * immutable and so is shared by the token's requests.
 */
function principalOf(token: VerifiedToken, subject: SubjectStatus | null, client: SubjectStatus | null): TokenPrincipal {
  const last = decided.get(token);
  if (last !== undefined && last.subject === subject && last.client === client) return last.principal;
  const principal = buildPrincipal(token, subject, client);
  decided.set(token, { subject: subject!, client: client!, principal });
  return principal;
}

function buildPrincipal(token: VerifiedToken, subject: SubjectStatus | null, client: SubjectStatus | null): TokenPrincipal {
  // A client without a role (no client_credentials) cannot act on its own behalf.
  if (!subject || !subject.active || subject.role === null) throw invalidToken('The token subject is no longer active');
  // A deleted client's tokens end with it, user tokens included (verified tokens are cached by token, and
  // the client's deletion evicts only what is keyed by its client_id).
  if (!client) throw invalidToken('The client of the token is no longer registered');
  // The client_id may have been deleted and registered again: the token belongs to the old registration.
  if (client.id !== token.clientRegistrationId) throw invalidToken('The client of the token is no longer registered');
  // A self-contained token has no row to mark: the client's tokens were revoked since it was issued.
  if (token.clientRevocations !== null && token.clientRevocations !== client.revocations) throw invalidToken('The access token was revoked');
  return Object.freeze({
    kind: token.subjectType,
    subject: token.subject,
    id: subject.id,
    role: subject.role,
    clientId: token.clientId,
    clientRegistrationId: client.id,
    clientRateLimit: client.rateLimit,
    // What the client may hold now: removing a scope from a client narrows the tokens it already has.
    scopes: effectiveScopes(token.scopes, client.scopes),
    token: Object.freeze({ jti: token.jti, format: token.format, grantType: token.grantType, issuedAt: token.issuedAt, expiresAt: token.expiresAt }),
  });
}

function effectiveScopes(granted: readonly string[], allowed: ReadonlySet<string> | null): Set<string> {
  const scopes = new Set<string>();
  for (const scope of granted) if (allowed === null || allowed.has(scope)) scopes.add(scope);
  return scopes;
}
