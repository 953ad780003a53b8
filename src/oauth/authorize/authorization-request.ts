import type { Kysely } from 'kysely';
import { findClientByClientId, type ClientRecord } from '../../storage/clients.js';
import type { Database } from '../../storage/schema.js';
import { OAuthError } from '../oauth-error.js';
import { isCodeChallenge, PKCE_METHOD } from '../pkce.js';
import { matchRedirectUri } from '../redirect-uri.js';
import { parseScope, REFUSED_SCOPE_REDIRECT, refusedScopes, SCOPE_REQUIRED } from '../scope-parameter.js';
import { AuthorizationPageError, AuthorizationRedirectError } from './authorization-errors.js';

export const AUTHORIZATION_CODE = 'authorization_code';
export type Prompt = 'none' | 'login' | 'consent';

/** A validated authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3, OpenID Connect Core §3.1.2.1). */
export interface AuthorizationRequest {
  clientId: string;
  clientRegistrationId: string;
  redirectUri: string;
  scopes: string[];
  state: string;
  nonce: string | null;
  codeChallenge: string | null;
  prompt: Prompt[];
  /** Seconds; a sign-in older than this must be repeated (OpenID Connect Core §3.1.2.1). */
  maxAge: number | null;
  loginHint: string | null;
}

const MAX_PARAMETER = 2048;

/**
 * Reads the request in the order RFC 6749 §4.1.2.1 sets: first client_id and redirect_uri, whose failures
 * end on an error page; then everything else, whose failures are redirected to the verified redirect_uri.
 */
export async function readAuthorizationRequest(db: Kysely<Database>, raw: URLSearchParams): Promise<{ request: AuthorizationRequest; client: ClientRecord }> {
  const single = (name: string): string | undefined => {
    const values = raw.getAll(name);
    if (values.length > 1) throw new OAuthError('invalid_request', `The ${name} parameter is repeated.`);
    const value = values[0];
    if (value !== undefined && value.length > MAX_PARAMETER) throw new OAuthError('invalid_request', `The ${name} parameter is too long.`);
    return value === '' ? undefined : value;
  };
  let clientId: string | undefined;
  let presentedUri: string | undefined;
  try {
    clientId = single('client_id');
    presentedUri = single('redirect_uri');
  } catch (error) {
    throw new AuthorizationPageError('Invalid request', (error as Error).message);
  }
  if (clientId === undefined) throw new AuthorizationPageError('Invalid request', 'The request names no client (client_id is missing).');
  const found = await findClientByClientId(db, clientId);
  if (!found) throw new AuthorizationPageError('Unknown application', 'The application that sent you here is not registered with this server.');
  const { secretHash: _secret, ...client } = found;
  // Required even when one URI is registered: OpenID Connect requires it, and a code is bound to it.
  if (presentedUri === undefined) throw new AuthorizationPageError('Invalid request', 'The request has no redirect_uri.');
  const redirectUri = matchRedirectUri(client.redirectUris, presentedUri);
  if (redirectUri === null) {
    throw new AuthorizationPageError('Invalid redirect', 'The redirect_uri does not match any address registered for this application.');
  }
  // From here on, errors go back to the client. The exact presented URI is used (its loopback port included).
  let state: string | undefined;
  try {
    state = single('state');
  } catch (error) {
    throw new AuthorizationRedirectError(presentedUri, 'invalid_request', (error as Error).message, undefined);
  }
  const fail = (error: AuthorizationRedirectError['error'], description: string): never => {
    throw new AuthorizationRedirectError(presentedUri, error, description, state);
  };
  try {
    return { client, request: readRest(client, presentedUri, state, single, fail) };
  } catch (error) {
    if (error instanceof OAuthError) fail(error.error, error.description);
    throw error;
  }
}

function readRest(
  client: ClientRecord,
  redirectUri: string,
  state: string | undefined,
  single: (name: string) => string | undefined,
  fail: (error: AuthorizationRedirectError['error'], description: string) => never,
): AuthorizationRequest {
  // OpenID Connect Core §6: request objects are not supported and say so with their own codes.
  if (single('request') !== undefined) fail('request_not_supported', 'Request objects are not supported.');
  if (single('request_uri') !== undefined) fail('request_uri_not_supported', 'request_uri is not supported.');
  const responseType = single('response_type');
  if (responseType === undefined) fail('invalid_request', 'response_type is required.');
  // RFC 9700 §2.1.2: the implicit grant and every response type that returns a token from this endpoint are refused.
  if (responseType !== 'code') fail('unsupported_response_type', 'Only response_type=code is supported.');
  const responseMode = single('response_mode');
  if (responseMode !== undefined && responseMode !== 'query') fail('invalid_request', 'Only response_mode=query is supported.');
  if (!client.grantTypes.includes(AUTHORIZATION_CODE)) fail('unauthorized_client', 'The client may not use the authorization code grant.');
  // Seed, OAuth security rule 2: every request carries state, and it comes back unchanged.
  if (state === undefined) fail('invalid_request', 'state is required.');

  const codeChallenge = single('code_challenge') ?? null;
  const method = single('code_challenge_method');
  if (codeChallenge === null) {
    if (client.type === 'public') fail('invalid_request', 'A public client must use PKCE (code_challenge with S256).');
    if (method !== undefined) fail('invalid_request', 'code_challenge_method without code_challenge.');
  } else {
    // RFC 7636 §4.3 defaults to `plain` without a method; this server accepts S256 only, so it must be named.
    if (method !== PKCE_METHOD) fail('invalid_request', 'code_challenge_method must be S256.');
    if (!isCodeChallenge(codeChallenge)) fail('invalid_request', 'The code_challenge is malformed.');
  }

  const scopeParameter = single('scope');
  if (scopeParameter === undefined) fail('invalid_scope', SCOPE_REQUIRED);
  const scopes = parseScope(scopeParameter!);
  if (refusedScopes(scopes, client.scopes).length > 0) fail('invalid_scope', REFUSED_SCOPE_REDIRECT);

  const prompt = readPrompt(single('prompt'), fail);
  const maxAgeParameter = single('max_age');
  let maxAge: number | null = null;
  if (maxAgeParameter !== undefined) {
    if (!/^\d{1,9}$/.test(maxAgeParameter)) fail('invalid_request', 'max_age must be a number of seconds.');
    maxAge = Number(maxAgeParameter);
  }
  return {
    clientId: client.clientId,
    clientRegistrationId: client.id,
    redirectUri,
    scopes,
    state: state!,
    nonce: single('nonce') ?? null,
    codeChallenge,
    prompt,
    maxAge,
    loginHint: single('login_hint') ?? null,
  };
}

const PROMPTS: readonly string[] = ['none', 'login', 'consent'];

function readPrompt(value: string | undefined, fail: (error: AuthorizationRedirectError['error'], description: string) => never): Prompt[] {
  if (value === undefined) return [];
  const prompts = [...new Set(value.split(' '))];
  // The description names the values supported, never the one sent (it is shown by clients, RFC 6749 §4.1.2.1).
  for (const prompt of prompts) if (!PROMPTS.includes(prompt)) fail('invalid_request', 'prompt must be none, login or consent.');
  // OpenID Connect Core §3.1.2.1: none with any other value is an error.
  if (prompts.includes('none') && prompts.length > 1) fail('invalid_request', 'prompt=none cannot be combined with another value.');
  return prompts as Prompt[];
}
