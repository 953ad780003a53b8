import type { ClientRecord } from '../../storage/clients.js';
import type { ConsentRow } from '../../storage/consents.js';

/**
 * Whether the user must be asked: always when the client cannot be told apart from an impersonator (see
 * below) or asks with prompt=consent; not for a first-party client (registered as such by an
 * administrator), nor when a remembered consent for this client registration covers every requested scope.
 */
export function needsConsent(client: ClientRecord, redirectUri: string, consent: ConsentRow | null, scopes: readonly string[], promptConsent: boolean): boolean {
  if (promptConsent || isUnverifiableClient(client, redirectUri)) return true;
  if (client.firstParty) return false;
  if (consent === null) return true;
  const remembered = new Set(consent.scopes.split(' '));
  return scopes.some((scope) => !remembered.has(scope));
}

/**
 * RFC 8252 §8.6: a public client redirecting to a loopback address or a private-use URI scheme cannot be
 * authenticated — any app on the device can listen on that port or claim that scheme, and use the real
 * app's client_id. Nothing may be granted to such a request without the user seeing it, so neither a
 * remembered consent nor the first-party flag answers for the user. A public client redirecting to an
 * https page is a browser app: only that site's owner receives its codes, so remembered consent holds.
 */
export function isUnverifiableClient(client: Pick<ClientRecord, 'type'>, redirectUri: string): boolean {
  return client.type === 'public' && !redirectUri.startsWith('https:');
}
