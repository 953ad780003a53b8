import type { ClientRecord } from '../../storage/clients.js';
import type { ConsentRow } from '../../storage/consents.js';

/**
 * Whether the user must be asked: not for a first-party client (registered as such by an administrator),
 * not when a remembered consent for this client registration covers every requested scope, always when
 * the client asks with prompt=consent.
 */
export function needsConsent(client: ClientRecord, consent: ConsentRow | null, scopes: readonly string[], promptConsent: boolean): boolean {
  if (promptConsent) return true;
  if (client.firstParty) return false;
  if (consent === null) return true;
  const remembered = new Set(consent.scopes.split(' '));
  return scopes.some((scope) => !remembered.has(scope));
}
