import { compactVerify, decodeProtectedHeader } from 'jose';
import type { FastifyInstance } from 'fastify';
import { findClientByClientId, type ClientWithSecret } from '../../storage/clients.js';
import type { SigningAlg } from '../keys/key-store.js';
import type { KeyStore } from '../keys/key-store.js';
import type { PageDeps } from '../browser/page-deps.js';
import { browserBinding } from '../browser/sign-in-sessions.js';
import { errorPage, FORM_EXPIRED } from '../pages/error-page.js';
import { originOf } from '../pages/html.js';
import { logoutConfirmPage, signedOutPage } from '../pages/logout-pages.js';
import { withQuery } from '../redirect-uri.js';
import { redirect, repeatAsGet, requestParams, sendPage, singleParam } from './page-reply.js';


class LogoutRequestError extends Error {}

interface LogoutRequest {
  client: ClientWithSecret | null;
  postLogoutRedirectUri: string | null;
  state: string | null;
}

/**
 * OpenID Connect RP-Initiated Logout 1.0: GET or POST /oauth/logout (the metadata's end_session_endpoint)
 * asks the user to confirm (§2: the OP should, or any site could sign users out), then ends the session and
 * returns to a post_logout_redirect_uri registered for the client — exact match, as for redirect_uri — or
 * shows that the user is signed out.
 */
export function registerLogoutEndpoint(scope: FastifyInstance, deps: PageDeps & { keys: KeyStore }): void {
  scope.route({
    method: ['GET', 'POST'],
    url: '/oauth/logout',
    handler: async (request, reply) => {
      const params = requestParams(request);
      let logout: LogoutRequest;
      try {
        logout = await readLogoutRequest(deps, params);
      } catch (error) {
        if (error instanceof LogoutRequestError) return sendPage(reply, errorPage(400, 'Invalid sign-out request', error.message));
        throw error;
      }
      const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
      // A post from another site carries no binding (SameSite=Lax): ask again as a GET, which does.
      if (request.method === 'POST' && !binding.presented) {
        const repeated = new URLSearchParams(params);
        repeated.delete('csrf_token');
        return repeatAsGet(reply, '/oauth/logout', repeated);
      }
      const confirmed = request.method === 'POST' && singleParam(params, 'csrf_token') !== undefined;
      if (!confirmed) {
        const hidden: Record<string, string> = {};
        if (logout.client) hidden.client_id = logout.client.clientId;
        if (logout.postLogoutRedirectUri) hidden.post_logout_redirect_uri = logout.postLogoutRedirectUri;
        if (logout.state) hidden.state = logout.state;
        return sendPage(
          reply,
          logoutConfirmPage({
            csrf: deps.csrf.issue(binding.browser, 'logout'),
            hidden,
            clientName: logout.client?.name ?? null,
            formTargets: logout.postLogoutRedirectUri ? [originOf(logout.postLogoutRedirectUri)] : [],
          }),
          [binding.setCookie],
        );
      }
      if (!binding.presented || !deps.csrf.verify(singleParam(params, 'csrf_token'), binding.browser, 'logout')) return sendPage(reply, FORM_EXPIRED);
      const signedIn = await deps.sessions.current(request.headers.cookie);
      const cleared = await deps.sessions.end(signedIn?.sessionId ?? null);
      if (signedIn) {
        deps.audit.record({
          requestId: request.id,
          interface: 'oauth',
          operation: 'logout',
          subject: signedIn.user.id,
          clientId: logout.client?.clientId ?? null,
          resourceType: null,
          resourceId: null,
          decision: 'allow',
          reason: 'authenticated',
        });
      }
      if (logout.postLogoutRedirectUri) {
        return redirect(reply, withQuery(logout.postLogoutRedirectUri, { state: logout.state ?? undefined }), [cleared]);
      }
      return sendPage(reply, signedOutPage(), [cleared]);
    },
  });
}

async function readLogoutRequest(deps: PageDeps & { keys: KeyStore }, params: URLSearchParams): Promise<LogoutRequest> {
  const hint = singleParam(params, 'id_token_hint');
  let clientId = singleParam(params, 'client_id') ?? null;
  if (hint !== undefined) {
    const audience = await verifiedAudience(deps, hint);
    if (audience === null) throw new LogoutRequestError('The id_token_hint was not issued by this server.');
    if (clientId !== null && clientId !== audience) throw new LogoutRequestError('client_id does not match the id_token_hint.');
    clientId = audience;
  }
  const client = clientId === null ? null : await findClientByClientId(deps.db, clientId);
  if (clientId !== null && !client) throw new LogoutRequestError('The application is not registered with this server.');
  const uri = singleParam(params, 'post_logout_redirect_uri') ?? null;
  // §3: the URI is checked against the registration that id_token_hint or client_id names; without either
  // there is none to check it against.
  if (uri !== null && !client) throw new LogoutRequestError('A post_logout_redirect_uri needs id_token_hint or client_id to name the application it belongs to.');
  if (uri !== null && (!client || !client.postLogoutRedirectUris.includes(uri))) {
    throw new LogoutRequestError('The post_logout_redirect_uri is not registered for this application.');
  }
  const state = singleParam(params, 'state') ?? null;
  return { client, postLogoutRedirectUri: uri, state: state !== null && state.length <= 2048 ? state : null };
}

/**
 * The `aud` of an ID token this server signed. An expired one is fine (§2: the RP may send an expired ID
 * token as a hint), so only the signature, the issuer and the audience are checked.
 */
async function verifiedAudience(deps: PageDeps & { keys: KeyStore }, token: string): Promise<string | null> {
  try {
    const header = decodeProtectedHeader(token);
    if ((header.alg !== 'RS256' && header.alg !== 'ES256') || typeof header.kid !== 'string' || header.typ !== 'JWT') return null;
    const key = await deps.keys.verificationKey(header.kid, header.alg as SigningAlg);
    if (!key) return null;
    const { payload } = await compactVerify(token, key, { algorithms: [header.alg] });
    const claims = JSON.parse(new TextDecoder().decode(payload)) as { iss?: unknown; aud?: unknown };
    return claims.iss === deps.config.issuer && typeof claims.aud === 'string' ? claims.aud : null;
  } catch {
    return null;
  }
}
