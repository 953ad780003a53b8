import { isBrowserBasedClient } from '../oauth/tokens/user-tokens.js';
import { ApiError, type ErrorDetail } from '../errors/registry.js';
import { REFRESH_TOKEN_ISSUING_GRANTS } from '../oauth/grant-types.js';
import type { PolicyTable } from '../policy/table.js';
import { classifyRedirectUri } from './redirect-uris.js';

/** A registration as POST and PUT /v1/clients and `clients create` receive it, after the contract schema. */
export interface ClientSettings {
  type: string;
  redirectUris: readonly string[];
  postLogoutRedirectUris?: readonly string[];
  grantTypes: readonly string[];
  scopes: readonly string[];
  role?: string | null;
  legacy?: boolean;
}

/**
 * The rules a registration must keep beyond its schema, for the API and the command line alike: every
 * problem is a detail of one 400 VALIDATION_FAILED, its path a JSON pointer into the body.
 */
export function checkClientSettings(policy: PolicyTable, settings: ClientSettings): void {
  const details = [
    ...checkScopes(policy, settings),
    ...checkRedirectUris('redirectUris', settings.redirectUris),
    ...checkRedirectUris('postLogoutRedirectUris', settings.postLogoutRedirectUris ?? []),
    ...checkRedirectUse(settings),
    ...checkGrantTypes(settings),
    ...checkRole(policy, settings),
  ];
  if (details.length > 0) throw new ApiError('VALIDATION_FAILED', 'The client registration is not valid.', { details });
}

function checkScopes(policy: PolicyTable, { scopes }: ClientSettings): ErrorDetail[] {
  return scopes.flatMap((scope, i) => (scope in policy.scopes ? [] : [{ path: `/body/scopes/${i}`, message: `unknown scope "${scope}"` }]));
}

function checkRedirectUris(field: string, uris: readonly string[]): ErrorDetail[] {
  return uris.flatMap((uri, i) => {
    const check = classifyRedirectUri(uri);
    return 'problem' in check ? [{ path: `/body/${field}/${i}`, message: check.problem }] : [];
  });
}

/** A public client sent back to an https page is a web page itself: a single-page application. */
function isBrowserBased(settings: ClientSettings): boolean {
  return isBrowserBasedClient(settings);
}

/**
 * Only the authorization code grant sends the user agent back to the client (RFC 6749 §4.1.2; implicit is
 * not served) and only a client that signs users in signs them out (RP-Initiated Logout 1.0 §2): a URI the
 * server would never use is a mistake in the registration, not a harmless extra.
 */
function checkRedirectUse({ grantTypes, redirectUris, postLogoutRedirectUris = [] }: ClientSettings): ErrorDetail[] {
  if (grantTypes.includes('authorization_code')) {
    return redirectUris.length === 0 ? [{ path: '/body/redirectUris', message: 'authorization_code needs at least one redirect URI' }] : [];
  }
  return [
    ...(redirectUris.length > 0 ? [{ path: '/body/redirectUris', message: 'are used only with authorization_code' }] : []),
    ...(postLogoutRedirectUris.length > 0 ? [{ path: '/body/postLogoutRedirectUris', message: 'are used only with authorization_code' }] : []),
  ];
}

function checkGrantTypes(settings: ClientSettings): ErrorDetail[] {
  const { type, grantTypes, legacy = false } = settings;
  const problems: string[] = [];
  // RFC 6749 §4.4: client credentials authenticate the client itself, which a public client cannot do.
  if (type === 'public' && grantTypes.includes('client_credentials')) problems.push('a public client cannot use client_credentials');
  // RFC 9700 §2.4: the password grant exposes the user's credentials to the client; only a legacy
  // client may keep it, and the token endpoint also needs OAUTH_PASSWORD_GRANT=enabled.
  if (type === 'public' && grantTypes.includes('password')) problems.push('a public client cannot use password');
  if (grantTypes.includes('password') && !legacy) problems.push('only a legacy client may use password');
  if (grantTypes.includes('refresh_token')) {
    // RFC 6749 §1.5: a refresh token is obtained from another grant; on its own it can never be used.
    if (!grantTypes.some((grant) => (REFRESH_TOKEN_ISSUING_GRANTS as readonly string[]).includes(grant))) {
      problems.push(`refresh_token needs a grant that issues one: ${REFRESH_TOKEN_ISSUING_GRANTS.join(', ')}`);
    }
    // A public client redirected to an https page runs in a browser, where the refresh token would be
    // exposed to every script of the page; it renews with prompt=none instead (RFC 9700 §4.14, seed).
    if (isBrowserBased(settings)) {
      problems.push('a public client with an https redirect URI runs in a browser and cannot use refresh_token; it renews with prompt=none');
    }
  }
  return problems.map((message) => ({ path: '/body/grantTypes', message }));
}

/**
 * Only a client using client credentials acts on its own behalf (RFC 6749 §4.4), so only it has a role;
 * every other token acts with its user's role, and a role on such a client would change nothing.
 */
function checkRole(policy: PolicyTable, { grantTypes, role }: ClientSettings): ErrorDetail[] {
  if (!grantTypes.includes('client_credentials')) {
    return role === undefined || role === null ? [] : [{ path: '/body/role', message: 'is used only with client_credentials' }];
  }
  if (role === undefined || role === null) return [{ path: '/body/role', message: 'is required with client_credentials' }];
  return role in policy.roles ? [] : [{ path: '/body/role', message: `unknown role "${role}"` }];
}
