import type { Kysely } from 'kysely';
import type { SignInThrottle } from '../../limits/sign-in-throttle.js';
import type { ClientRecord } from '../../storage/clients.js';
import { newId } from '../../storage/ids.js';
import type { Database } from '../../storage/schema.js';
import { OAuthError } from '../oauth-error.js';
import { checkScopesAllowed, parseScope } from '../scope-parameter.js';
import type { CheckedGrant } from './grant-commit.js';
import { checkUserCredentials } from '../user-credentials.js';

export const PASSWORD = 'password';

export interface PasswordGrantContext {
  db: Kysely<Database>;
  /** OAUTH_PASSWORD_GRANT=enabled. */
  enabled: boolean;
  throttle: SignInThrottle;
  address: string;
  now: number;
}

/**
 * RFC 6749 §4.3, deprecated (RFC 9700 §2.4: MUST NOT be used): served only for migrating legacy clients,
 * when the server enables it and the client is marked legacy. Guessing is throttled like the login page.
 */
export async function grantPassword(context: PasswordGrantContext, client: ClientRecord, params: Readonly<Record<string, string>>): Promise<CheckedGrant> {
  if (!context.enabled || !client.legacy || !client.grantTypes.includes(PASSWORD)) {
    throw new OAuthError('unauthorized_client', 'The password grant is not available to this client.');
  }
  const { username, password } = params;
  if (username === undefined || password === undefined) throw new OAuthError('invalid_request', 'username and password are required.');
  const scopes = params.scope === undefined ? [...client.scopes] : parseScope(params.scope);
  checkScopesAllowed(scopes, client.scopes);
  // No browser here, so no known device: the account's lock over all addresses applies.
  const outcome = await context.throttle.attempt({ account: username, address: context.address }, () => checkUserCredentials(context.db, username, password));
  if (outcome.throttled) {
    throw new OAuthError('invalid_grant', `Too many failed sign-ins; retry in ${outcome.retryAfterSeconds} s.`, 400, { 'retry-after': String(outcome.retryAfterSeconds) });
  }
  const checked = outcome.value;
  if (!checked) throw new OAuthError('invalid_grant', 'The username or password is wrong.');
  const { user, revocations } = checked;
  return {
    client,
    userId: user.id,
    scopes,
    grantId: newId(),
    grantType: PASSWORD,
    authTime: Math.floor(context.now / 1000),
    nonce: null,
    // The password was checked before the grant's transaction: a change of it (or of the account) since then
    // means it may be the very password being replaced, and a revocation of the user's tokens since then
    // (signing out everywhere, consent withdrawn) must end this grant too, though it has no code or token
    // of its own to end.
    claim: async (_store, locked) => {
      if (!locked || !locked.active || locked.updatedAt !== user.updatedAt || locked.revocations !== revocations) {
        return new OAuthError('invalid_grant', 'The account changed during the request; sign in again.');
      }
      return null;
    },
  };
}
