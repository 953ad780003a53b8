import type { ClientRecord } from '../../storage/clients.js';
import { OAuthError } from '../oauth-error.js';
import { USER_SCOPES } from '../scopes.js';

export const CLIENT_CREDENTIALS = 'client_credentials';

export interface ClientCredentialsGrant {
  subject: string;
  subjectType: 'client';
  scopes: string[];
}

/** RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), tokens separated by single spaces. */
const SCOPE = /^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/;

/**
 * RFC 6749 §4.4: the client credentials grant. Only a confidential client may use it (§4.4, §2.1), and
 * only when registered for it; the token's subject is the client itself.
 */
export function grantClientCredentials(client: ClientRecord, params: Readonly<{ scope?: string }>): ClientCredentialsGrant {
  // A client acts on its own behalf only with a role to act in (registration requires one with this grant).
  if (client.type !== 'confidential' || !client.grantTypes.includes(CLIENT_CREDENTIALS) || client.role === null) {
    throw new OAuthError('unauthorized_client', 'The client is not allowed to use the client_credentials grant.');
  }
  return { subject: client.clientId, subjectType: 'client', scopes: selectScopes(client, params.scope) };
}

function selectScopes(client: ClientRecord, requested: string | undefined): string[] {
  const allowed = client.scopes.filter((scope) => !USER_SCOPES.has(scope));
  // RFC 6749 §3.3: without a scope parameter the server applies a default — here, all the client may have.
  if (requested === undefined) {
    if (allowed.length === 0) throw new OAuthError('invalid_scope', 'The client has no scope that can be granted.');
    return allowed;
  }
  if (!SCOPE.test(requested)) throw new OAuthError('invalid_scope', 'The scope parameter is malformed.');
  const scopes = [...new Set(requested.split(' '))];
  const refused = scopes.filter((scope) => !allowed.includes(scope));
  if (refused.length > 0) throw new OAuthError('invalid_scope', `The client may not request: ${refused.join(' ')}.`);
  return scopes;
}
