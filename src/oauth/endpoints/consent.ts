import type { FastifyInstance } from 'fastify';
import { rememberConsent } from '../../storage/consents.js';
import { codeRedirect, mustSignIn } from '../authorize/authorization-flow.js';
import { currentRegistration, REGISTRATION_CHANGED } from '../authorize/current-registration.js';
import { errorRedirect } from '../authorize/issue-code.js';
import type { PageDeps } from '../browser/page-deps.js';
import { browserBinding } from '../browser/sign-in-sessions.js';
import { consentPage } from '../pages/consent-page.js';
import { errorPage, FORM_EXPIRED } from '../pages/error-page.js';
import { originOf } from '../pages/html.js';
import { redirect, requestParams, sendPage, singleParam } from './page-reply.js';

const EXPIRED = errorPage(400, 'Request expired', 'This authorization request has expired, was answered already, or was opened in another browser.', 'Return to the application and start again.');

/**
 * GET /oauth/consent lists each requested scope with its description (seed, OAuth security rule 6: the
 * user sees the scopes and can decline); POST records the user's choice — every scope may be unticked —
 * and sends the browser back to the client with a code for the allowed scopes, or with access_denied.
 */
export function registerConsentPage(scope: FastifyInstance, deps: PageDeps): void {
  scope.get('/oauth/consent', async (request, reply) => {
    const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
    const interaction = await deps.interactions.open(singleParam(requestParams(request), 'interaction'), binding.presented ? binding.browser : null);
    if (!interaction || interaction.params.kind !== 'authorize') return sendPage(reply, EXPIRED);
    const signedIn = await deps.sessions.current(request.headers.cookie);
    const { request: authorization } = interaction.params;
    if (!signedIn || mustSignIn(authorization, signedIn, interaction, deps.clock())) return redirect(reply, `/oauth/login?interaction=${interaction.id}`);
    const client = await currentRegistration(deps.db, authorization);
    if (!client) return sendPage(reply, REGISTRATION_CHANGED);
    return sendPage(
      reply,
      consentPage({
        action: '/oauth/consent',
        hidden: { interaction: interaction.id, csrf_token: deps.csrf.issue(binding.browser, `consent:${interaction.id}`) },
        clientName: client.name,
        userEmail: signedIn.user.email,
        scopes: authorization.scopes.map((name) => ({ name, description: deps.scopeDescriptions[name] ?? name })),
        formTargets: [originOf(authorization.redirectUri)],
      }),
    );
  });

  scope.post('/oauth/consent', async (request, reply) => {
    const form = requestParams(request);
    const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
    const browser = binding.presented ? binding.browser : null;
    const interaction = await deps.interactions.open(singleParam(form, 'interaction'), browser);
    if (!interaction || interaction.params.kind !== 'authorize') return sendPage(reply, EXPIRED);
    if (!deps.csrf.verify(singleParam(form, 'csrf_token'), browser, `consent:${interaction.id}`)) return sendPage(reply, FORM_EXPIRED);
    const signedIn = await deps.sessions.current(request.headers.cookie);
    const { request: authorization } = interaction.params;
    if (!signedIn || mustSignIn(authorization, signedIn, interaction, deps.clock())) return redirect(reply, `/oauth/login?interaction=${interaction.id}`);
    // Neither a code nor a denial goes to a redirect URI the client no longer has.
    if (!(await currentRegistration(deps.db, authorization))) return sendPage(reply, REGISTRATION_CHANGED);
    if (!(await deps.interactions.complete(interaction))) return sendPage(reply, EXPIRED);
    const ticked = new Set(form.getAll('scope'));
    // Only requested scopes can be allowed; a scope the form did not offer is ignored, not added.
    const allowed = authorization.scopes.filter((name) => ticked.has(name));
    const page = { requestId: request.id, address: request.ip };
    const decided = singleParam(form, 'decision');
    // The user's answer, with the scopes it was about (those declined, or those allowed).
    const recordConsent = (decision: 'allow' | 'deny', scopes: readonly string[]) =>
      deps.audit.record({
        requestId: page.requestId,
        interface: 'oauth',
        operation: 'consent',
        subject: signedIn.user.id,
        clientId: authorization.clientId,
        resourceType: null,
        resourceId: null,
        decision,
        reason: decision === 'allow' ? 'granted' : 'consent',
        scopes: scopes.join(' '),
      });
    if (decided !== 'allow' || allowed.length === 0) {
      recordConsent('deny', authorization.scopes);
      const description = decided === 'allow' ? 'No scope was allowed.' : 'The user denied the request.';
      const location = errorRedirect(authorization.redirectUri, deps.config.issuer, 'access_denied', description, authorization.state);
      return redirect(reply, location);
    }
    const declinedScopes = await rememberConsent(
      deps.db,
      {
        userId: signedIn.user.id,
        clientRegistrationId: authorization.clientRegistrationId,
        clientId: authorization.clientId,
        scopes: [...allowed].sort().join(' '),
        grantedAt: new Date(deps.clock()).toISOString(),
      },
      authorization.scopes,
    );
    recordConsent('allow', allowed);
    return redirect(reply, await codeRedirect(deps, authorization, signedIn, allowed, page, declinedScopes));
  });
}
