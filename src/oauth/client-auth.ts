import { UTF8 } from '../http/body-encoding.js';
import { containsInvalidText } from '../rest/text-integrity.js';
import type { ClientRecord, ClientWithSecret } from '../storage/clients.js';
import { OAuthError } from './oauth-error.js';
import { digestSecret, secretMatches } from './secrets.js';

export type ClientAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'none';

export interface ClientAuthRequest {
  /** The Authorization header, if any. */
  authorization: string | undefined;
  /** Form parameters of the request, one value each. */
  params: Readonly<Record<string, string>>;
}

/** The registration a client_id names, or null (registered-clients.ts holds them in memory). */
export type FindClient = (clientId: string) => Promise<ClientWithSecret | null>;

export interface AuthenticatedClient {
  client: ClientRecord;
  method: ClientAuthMethod;
}

/**
 * RFC 9110 §15.5.2: every 401 names a scheme the client can use; RFC 6749 §5.2 asks for the one the client
 * tried when it used the Authorization header. Basic is the only header scheme this server accepts.
 */
const CHALLENGE = { 'WWW-Authenticate': 'Basic realm="portcullis"' };
/** Compared against when the client is unknown, so that case costs the same as a wrong secret. */
const UNKNOWN_CLIENT_DIGEST = digestSecret('unknown client');

/**
 * Client authentication at the token endpoint (RFC 6749 §2.3.1): `client_secret_basic`,
 * `client_secret_post`, or a public client identified by `client_id` alone (§2.3, §3.2.1).
 */
export async function authenticateClient(findClient: FindClient, request: ClientAuthRequest): Promise<AuthenticatedClient> {
  const { authorization, params } = request;
  if (authorization !== undefined) {
    // RFC 6749 §2.3: a client MUST NOT use more than one authentication method in each request.
    if (params.client_secret !== undefined) throw new OAuthError('invalid_request', 'Use one client authentication method, not two.');
    const credentials = parseBasicCredentials(authorization);
    if (params.client_id !== undefined && params.client_id !== credentials.clientId) {
      throw new OAuthError('invalid_request', 'client_id does not match the Authorization header.');
    }
    return { client: await verifyClientSecret(findClient, credentials.clientId, credentials.secret), method: 'client_secret_basic' };
  }
  if (params.client_secret !== undefined) {
    if (params.client_id === undefined) throw new OAuthError('invalid_request', 'client_id is required with client_secret.');
    return { client: await verifyClientSecret(findClient, params.client_id, params.client_secret), method: 'client_secret_post' };
  }
  if (params.client_id === undefined) throw rejectClient('client_id is required (a public client sends it in the body; a confidential client authenticates with HTTP Basic).');
  const found = await findClient(params.client_id);
  if (!found) throw rejectClient('Client authentication failed.');
  if (found.type !== 'public') throw rejectClient('Client authentication is required.');
  return { client: stripSecret(found), method: 'none' };
}

/** The client_id a request names, whether or not it authenticates: for the audit record of a refusal. */
export function presentedClientId(request: ClientAuthRequest): string | null {
  if (request.authorization !== undefined) {
    try {
      return parseBasicCredentials(request.authorization).clientId;
    } catch {
      return null;
    }
  }
  return request.params.client_id ?? null;
}

async function verifyClientSecret(findClient: FindClient, clientId: string, secret: string): Promise<ClientRecord> {
  const found = await findClient(clientId);
  const matches = secretMatches(secret, found?.secretHash ?? UNKNOWN_CLIENT_DIGEST);
  // A public client has no secret: presenting one is a failed authentication, not a fallback to `none`.
  if (!found || found.type !== 'confidential' || found.secretHash === null || !matches) {
    throw rejectClient('Client authentication failed.');
  }
  return stripSecret(found);
}

/**
 * RFC 6749 §2.3.1: client_id and secret are form-urlencoded (Appendix B) before they are joined with ':'
 * and base64-encoded into the Basic credentials of RFC 7617; both are decoded here.
 */
function parseBasicCredentials(header: string): { clientId: string; secret: string } {
  const match = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(header);
  if (!match) throw rejectClient('The Authorization header must use the Basic scheme.');
  let decoded: string;
  try {
    // Not UTF-8 is malformed, not a credential made of replacement characters.
    decoded = UTF8.decode(Buffer.from(match[1]!, 'base64'));
  } catch {
    throw rejectClient('The Basic credentials are malformed.');
  }
  const colon = decoded.indexOf(':');
  const clientId = colon > 0 ? decodeFormComponent(decoded.slice(0, colon)) : null;
  const secret = colon > 0 ? decodeFormComponent(decoded.slice(colon + 1)) : null;
  if (!clientId || secret === null) throw rejectClient('The Basic credentials are malformed.');
  return { clientId, secret };
}

/**
 * One part, percent-decoded; null when it is malformed. decodeURIComponent refuses percent-encoded bytes that
 * are not UTF-8, but not a NUL, which is no client_id or secret this server issues and which PostgreSQL text
 * refuses: a client_id with one would fail the lookup as the server's fault.
 */
function decodeFormComponent(value: string): string | null {
  let decoded: string;
  try {
    decoded = decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return null;
  }
  return containsInvalidText(decoded) ? null : decoded;
}

/** RFC 6749 §5.2 invalid_client: 401 with the Basic challenge. */
function rejectClient(description: string): OAuthError {
  return new OAuthError('invalid_client', description, 401, CHALLENGE);
}

function stripSecret(client: ClientWithSecret): ClientRecord {
  const { secretHash: _secretHash, ...record } = client;
  return record;
}
