import type { FastifyInstance, FastifyReply } from 'fastify';
import { findClientById } from '../../storage/clients.js';
import { advanceAuthorization } from '../authorize/authorization-flow.js';
import { currentRegistration, REGISTRATION_CHANGED } from '../authorize/current-registration.js';
import type { OpenInteraction } from '../browser/interaction-store.js';
import type { PageDeps, PageRequest } from '../browser/page-deps.js';
import { browserBinding, type SignedIn } from '../browser/sign-in-sessions.js';
import { errorPage, FORM_EXPIRED } from '../pages/error-page.js';
import { originOf } from '../pages/html.js';
import { loginPage } from '../pages/login-page.js';
import { checkUserCredentials, currentCredentialStamp } from '../user-credentials.js';
import { redirect, requestParams, sendPage, singleParam } from './page-reply.js';

const EXPIRED = errorPage(400, 'Sign-in expired', 'This sign-in page has expired or was opened in another browser.', 'Return to the application and start again.');
const MAX_FIELD = 1024;

/**
 * GET /oauth/login shows the form for an interaction (a new one of its own when the user came to manage
 * their account); POST /oauth/login checks the password, starts a fresh session and answers 303 with the
 * interaction's next step.
 */
export function registerLoginPage(scope: FastifyInstance, deps: PageDeps): void {
  scope.get('/oauth/login', async (request, reply) => {
    const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
    const query = requestParams(request);
    const id = singleParam(query, 'interaction');
    const interaction = id === undefined ? unstored(query) : await deps.interactions.open(id, binding.presented ? binding.browser : null);
    if (!interaction) return sendPage(reply, EXPIRED, [binding.setCookie]);
    if (interaction.params.kind === 'authorize' && !(await currentRegistration(deps.db, interaction.params.request))) return sendPage(reply, REGISTRATION_CHANGED);
    const model = await formModel(deps, interaction, binding.browser);
    return sendPage(reply, loginPage({ ...model, error: null }), [binding.setCookie]);
  });

  scope.post('/oauth/login', async (request, reply) => {
    const form = requestParams(request);
    const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
    const browser = binding.presented ? binding.browser : null;
    const id = singleParam(form, 'interaction');
    const interaction = id === undefined ? unstored(form) : await deps.interactions.open(id, browser);
    if (!interaction) return sendPage(reply, EXPIRED);
    if (!deps.csrf.verify(singleParam(form, 'csrf_token'), browser, `login:${interaction.id || 'account'}`)) return sendPage(reply, FORM_EXPIRED);
    const email = (singleParam(form, 'email') ?? '').slice(0, MAX_FIELD);
    const password = singleParam(form, 'password') ?? '';
    const page: PageRequest = { requestId: request.id, address: request.ip };
    const model = await formModel(deps, interaction, binding.browser);
    const knownDevice = await deps.knownDevices.recognizeCurrent(request.headers.cookie, email, (account) => currentCredentialStamp(deps.db, account));
    const outcome = await deps.throttle.attempt({ account: email, address: request.ip, knownDevice }, async () =>
      email === '' || password === '' || password.length > MAX_FIELD ? null : checkUserCredentials(deps.db, email, password),
    );
    if (outcome.throttled) {
      reply.header('retry-after', String(outcome.retryAfterSeconds));
      return sendPage(reply, loginPage({ ...model, email, status: 429, error: `Too many failed sign-ins. Try again in ${Math.ceil(outcome.retryAfterSeconds / 60)} minutes.` }));
    }
    const checked = outcome.value;
    if (!checked) {
      recordLogin(deps, page, null, 'deny');
      return sendPage(reply, loginPage({ ...model, email, status: 401, error: 'The email or password is wrong.' }));
    }
    const { user, credentialStamp } = checked;
    // A fresh session on every sign-in; the one the browser had (another user's, perhaps) ends.
    const previous = await deps.sessions.current(request.headers.cookie);
    if (previous) await deps.sessions.end(previous.sessionId);
    const started = await deps.sessions.startAfterPasswordCheck(user.id, user.updatedAt);
    if (!started) {
      // The password was changed (or the user deactivated) while it was being checked.
      recordLogin(deps, page, null, 'deny');
      return sendPage(reply, loginPage({ ...model, email, status: 401, error: 'The email or password is wrong.' }));
    }
    recordLogin(deps, page, user.id, 'allow');
    const signedIn: SignedIn = { sessionId: started.sessionId, user, authTime: started.authTime };
    // This browser is now known to the account: guesses from elsewhere do not lock it out.
    const cookies = [started.setCookie, deps.knownDevices.remember(user.email, credentialStamp)];
    return continueAfterSignIn(deps, reply, interaction, signedIn, binding.browser, page, cookies);
  });
}

async function continueAfterSignIn(
  deps: PageDeps,
  reply: FastifyReply,
  interaction: OpenInteraction,
  signedIn: SignedIn,
  browser: string,
  page: PageRequest,
  cookies: string[],
): Promise<FastifyReply> {
  const { params } = interaction;
  if (params.kind === 'device') {
    return redirect(reply, `/oauth/device?user_code=${encodeURIComponent(params.userCode)}`, cookies);
  }
  if (params.kind === 'account') return redirect(reply, '/oauth/account', cookies);
  const client = await currentRegistration(deps.db, params.request);
  if (!client) return sendPage(reply, REGISTRATION_CHANGED, cookies);
  const updated = { ...params, signedInAt: signedIn.authTime };
  await deps.interactions.update(interaction, updated);
  const location = await advanceAuthorization(deps, { request: params.request, client, signedIn, browser, interaction: { ...interaction, params: updated } }, page);
  return redirect(reply, location, cookies);
}

/**
 * Signing in to manage one's account or to enter a device's user code needs no stored interaction: nothing
 * is pending that the form cannot carry, so an anonymous visit to the login page writes no row.
 */
function unstored(params: URLSearchParams): OpenInteraction {
  const userCode = singleParam(params, 'user_code');
  if (userCode !== undefined && userCode.length <= 16) return { id: '', rowId: '', params: { kind: 'device', userCode } };
  return { id: '', rowId: '', params: { kind: 'account' } };
}

async function formModel(deps: PageDeps, interaction: OpenInteraction, browser: string) {
  const { params } = interaction;
  let clientName: string | null = null;
  let email = '';
  let formTargets: string[] = [];
  if (params.kind === 'authorize') {
    clientName = (await findClientById(deps.db, params.request.clientRegistrationId))?.name ?? null;
    email = params.request.loginHint ?? '';
    // The form's answer may be the redirect back to the client (consent remembered).
    formTargets = [originOf(params.request.redirectUri)];
  }
  const userCode = params.kind === 'device' ? params.userCode : null;
  return { interaction: interaction.id, userCode, csrf: deps.csrf.issue(browser, `login:${interaction.id || 'account'}`), clientName, email, formTargets };
}

function recordLogin(deps: PageDeps, page: PageRequest, userId: string | null, decision: 'allow' | 'deny'): void {
  deps.audit.record({
    requestId: page.requestId,
    sourceAddress: page.address,
    interface: 'oauth',
    operation: 'login',
    subject: userId,
    clientId: null,
    resourceType: null,
    resourceId: null,
    decision,
    reason: decision === 'allow' ? 'authenticated' : 'authentication',
  });
}
