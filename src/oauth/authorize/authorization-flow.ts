import { findConsent } from '../../storage/consents.js';
import type { ClientRecord } from '../../storage/clients.js';
import type { OpenInteraction } from '../browser/interaction-store.js';
import type { PageDeps, PageRequest } from '../browser/page-deps.js';
import type { SignedIn } from '../browser/sign-in-sessions.js';
import type { AuthorizationRequest } from './authorization-request.js';
import { isUnverifiableClient, needsConsent } from './consent-check.js';
import { errorRedirect, issueAuthorizationCode } from './issue-code.js';

export interface AuthorizationState {
  request: AuthorizationRequest;
  client: ClientRecord;
  signedIn: SignedIn | null;
  browser: string;
  /** The interaction this request is already part of (after the login page), if any. */
  interaction: OpenInteraction | null;
}

/**
 * The next step of an authorization request, as a URL to send the browser to: the login page, the consent
 * page, or back to the client with a code or an error. Called by /oauth/authorize and again after the user
 * signs in; the consent page finishes on its own.
 */
export async function advanceAuthorization(deps: PageDeps, state: AuthorizationState, page: PageRequest): Promise<string> {
  const { request, client, signedIn } = state;
  const issuer = deps.config.issuer;
  if (mustSignIn(request, signedIn, state.interaction, deps.clock())) {
    // OpenID Connect Core §3.1.2.6: with prompt=none the answer is an error, never a page.
    if (request.prompt.includes('none')) {
      const description = signedIn !== null && hintNamesAnother(request, signedIn) ? 'The user named by login_hint is not signed in.' : 'The user is not signed in.';
      return errorRedirect(request.redirectUri, issuer, 'login_required', description, request.state);
    }
    return `/oauth/login?interaction=${await interactionFor(deps, state)}`;
  }
  const consent = await findConsent(deps.db, signedIn!.user.id, client.id);
  if (needsConsent(client, request.redirectUri, consent, request.scopes, request.prompt.includes('consent'))) {
    if (request.prompt.includes('none')) {
      // OpenID Connect Core §3.1.2.6: consent_required. For an app that cannot be authenticated the user is
      // asked every time, so the description says so rather than suggest that consenting once would do.
      const description = isUnverifiableClient(client, request.redirectUri)
        ? 'This application cannot be verified, so the user must allow each request.'
        : 'The user has not allowed this access.';
      return errorRedirect(request.redirectUri, issuer, 'consent_required', description, request.state);
    }
    return `/oauth/consent?interaction=${await interactionFor(deps, state)}`;
  }
  if (state.interaction !== null && !(await deps.interactions.complete(state.interaction))) {
    return errorRedirect(request.redirectUri, issuer, 'invalid_request', 'This authorization request was already answered.', request.state);
  }
  // Answered without the page: what the user declined when consenting still holds (no refresh token after an
  // unticked offline_access).
  return codeRedirect(deps, request, signedIn!, request.scopes, page, consent?.declinedScopes?.split(' ') ?? []);
}

/**
 * Whether the user must sign in (again) before this request goes on: nobody is signed in, or the client
 * asked for a fresh sign-in (prompt=login, or max_age shorter than the session's age) or for another user
 * (login_hint naming someone else) and the user has not signed in during this interaction. Every step of the interaction checks it — the consent page too,
 * so going to it directly cannot skip the sign-in the client asked for.
 */
export function mustSignIn(request: AuthorizationRequest, signedIn: SignedIn | null, interaction: OpenInteraction | null, now: number): boolean {
  if (signedIn === null) return true;
  const params = interaction?.params;
  const signedInHere = params?.kind === 'authorize' && params.signedInAt !== undefined && signedIn.authTime >= params.signedInAt;
  if (signedInHere) return false;
  // Times are whole seconds, so a sign-in in this very second has an elapsed time of 0: `>=` makes max_age=0
  // ask again as OpenID Connect intends (it is prompt=login).
  const tooOld = request.maxAge !== null && Math.floor(now / 1000) - signedIn.authTime >= request.maxAge;
  return request.prompt.includes('login') || tooOld || hintNamesAnother(request, signedIn);
}

/**
 * OpenID Connect Core §3.1.2.1: login_hint says whom the client expects. A session of someone else must
 * not answer for them; the login page opens with the hint filled in. Emails are unique regardless of case.
 */
function hintNamesAnother(request: AuthorizationRequest, signedIn: SignedIn): boolean {
  return request.loginHint !== null && request.loginHint.toLowerCase() !== signedIn.user.email.toLowerCase();
}

/** Issues the code for the scopes the user allowed, records the decision, and returns the redirect (an error when the user signed out meanwhile). */
export async function codeRedirect(
  deps: PageDeps,
  request: AuthorizationRequest,
  signedIn: SignedIn,
  scopes: readonly string[],
  page: PageRequest,
  rememberedDeclines: readonly string[] = [],
): Promise<string> {
  await deps.beforeCodeIssued?.();
  const code = await issueAuthorizationCode(deps.db, deps.config.issuer, request, { signedIn, scopes, rememberedDeclines }, deps.clock());
  if (code === null) return errorRedirect(request.redirectUri, deps.config.issuer, 'access_denied', 'The user signed out before the request was answered.', request.state);
  deps.audit.record({
    requestId: page.requestId,
    interface: 'oauth',
    operation: 'authorize',
    subject: signedIn.user.id,
    clientId: request.clientId,
    resourceType: 'grant',
    resourceId: code.grantId,
    decision: 'allow',
    reason: 'granted',
    scopes: scopes.join(' '),
  });
  return code.location;
}

/** The interaction's id in the URL: the existing one, or a new one bound to this browser. */
async function interactionFor(deps: PageDeps, state: AuthorizationState): Promise<string> {
  if (state.interaction !== null) return state.interaction.id;
  return deps.interactions.create({ kind: 'authorize', request: state.request }, state.browser);
}
