import type { ClientRecord } from '../../storage/clients.js';
import { OAuthError } from '../oauth-error.js';
import { checkScopesAllowed, parseScope } from '../scope-parameter.js';
import { USER_SCOPES } from '../scopes.js';

export const CLIENT_CREDENTIALS = 'client_credentials';

export interface ClientCredentialsGrant {
  subject: string;
  subjectType: 'client';
  scopes: string[];
}

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
  const scopes = parseScope(requested);
  checkScopesAllowed(scopes, allowed);
  return scopes;
}
