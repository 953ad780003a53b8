import type { Kysely } from 'kysely';
import { findClientById, type ClientRecord } from '../../storage/clients.js';
import type { Database } from '../../storage/schema.js';
import { errorPage } from '../pages/error-page.js';
import { matchRedirectUri } from '../redirect-uri.js';
import { AUTHORIZATION_CODE, type AuthorizationRequest } from './authorization-request.js';

/** Where an interaction ends when its client's registration no longer allows it: never back to the client. */
export const REGISTRATION_CHANGED = errorPage(
  400,
  'Application changed',
  'The application that sent you here was changed or removed while you were signing in.',
  'Return to the application and start again.',
);

/**
 * The client registration an authorization request was read for, if it still allows that request: an
 * administrator may remove a redirect URI, a grant type or a scope, or delete the client, while the user
 * is on the login or consent page. Looked up by registration id, so a client_id deleted and registered
 * again never continues an interaction of the old registration. Null means: show REGISTRATION_CHANGED,
 * issue nothing, and redirect nowhere — the redirect URI may no longer be the client's (RFC 6749 §4.1.2.1).
 */
export async function currentRegistration(db: Kysely<Database>, request: AuthorizationRequest): Promise<ClientRecord | null> {
  const found = await findClientById(db, request.clientRegistrationId);
  if (!found || found.clientId !== request.clientId) return null;
  if (!found.grantTypes.includes(AUTHORIZATION_CODE)) return null;
  if (matchRedirectUri(found.redirectUris, request.redirectUri) === null) return null;
  if (request.scopes.some((scope) => !found.scopes.includes(scope))) return null;
  const { secretHash: _secret, ...client } = found;
  return client;
}
