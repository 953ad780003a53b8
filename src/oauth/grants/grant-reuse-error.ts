import { OAuthError } from '../oauth-error.js';

/**
 * A used authorization code or a rotated refresh token came back (RFC 9700 §4.14.2, §2.2.2): someone holds
 * a copy. The grant is revoked whole before this is thrown; the token endpoint records it as `reuse`.
 * `revoked` says whether this presentation ended anything: a replay of a grant ended already writes
 * nothing and evicts nothing.
 */
export class GrantReuseError extends OAuthError {
  constructor(
    readonly grantId: string,
    readonly userId: string,
    description: string,
    readonly revoked: boolean,
  ) {
    super('invalid_grant', description);
  }
}
