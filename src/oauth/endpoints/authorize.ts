import type { FastifyInstance } from 'fastify';
import { auditableClientId } from '../../audit/audit-event.js';
import { AuthorizationPageError, AuthorizationRedirectError } from '../authorize/authorization-errors.js';
import { advanceAuthorization } from '../authorize/authorization-flow.js';
import { readAuthorizationRequest } from '../authorize/authorization-request.js';
import { errorRedirect } from '../authorize/issue-code.js';
import type { PageDeps } from '../browser/page-deps.js';
import { browserBinding } from '../browser/sign-in-sessions.js';
import { errorPage } from '../pages/error-page.js';
import { redirect, repeatAsGet, requestParams, sendPage } from './page-reply.js';

/**
 * GET and POST /oauth/authorize (RFC 6749 §4.1.1; OpenID Connect Core §3.1.2.1 requires both methods):
 * validate, then send the browser on to sign in, to consent, or back with a code.
 */
export function registerAuthorizeEndpoint(scope: FastifyInstance, deps: PageDeps): void {
  scope.route({
    method: ['GET', 'POST'],
    url: '/oauth/authorize',
    handler: async (request, reply) => {
      const page = { requestId: request.id, address: request.ip };
      let read: Awaited<ReturnType<typeof readAuthorizationRequest>>;
      try {
        read = await readAuthorizationRequest(deps.db, requestParams(request));
      } catch (error) {
        if (error instanceof AuthorizationPageError) return sendPage(reply, errorPage(error.status, error.title, error.description));
        if (error instanceof AuthorizationRedirectError) {
          if (error.error === 'unauthorized_client' || error.error === 'invalid_scope') {
            // The client is registered (its redirect_uri was verified); refusals without a user are aggregated.
            deps.audit.record({
              requestId: page.requestId,
              sourceAddress: page.address,
              interface: 'oauth',
              operation: 'authorize',
              subject: null,
              clientId: auditableClientId(requestParams(request).get('client_id')),
              resourceType: null,
              resourceId: null,
              decision: 'deny',
              reason: error.error === 'invalid_scope' ? 'scope' : 'grant',
            });
          }
          return redirect(reply, errorRedirect(error.redirectUri, deps.config.issuer, error.error, error.description, error.state));
        }
        throw error;
      }
      const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
      // OpenID Connect Core §3.1.2.1 allows a form post here, which from another site carries no cookie
      // (SameSite=Lax): the binding the browser may have is withheld, not absent. The same request as a GET
      // (a top-level navigation) carries it, and gets a new one only if there is none.
      if (!binding.presented && request.method === 'POST') return repeatAsGet(reply, '/oauth/authorize', requestParams(request));
      const signedIn = await deps.sessions.current(request.headers.cookie);
      const location = await advanceAuthorization(deps, { ...read, signedIn, browser: binding.browser, interaction: null }, page);
      return redirect(reply, location, [binding.setCookie]);
    },
  });
}
