import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { deleteConsent } from '../../storage/consents.js';
import { listUserApplications } from '../../storage/user-applications.js';
import { routes } from '../../../generated/routes.js';
import { partValidator } from '../../rest/validation.js';
import { isUniqueViolation } from '../../storage/unique-violation.js';
import { updatePasswordHash, updateUserEmail } from '../../storage/users.js';
import type { PageDeps } from '../browser/page-deps.js';
import { browserBinding, type SignedIn } from '../browser/sign-in-sessions.js';
import { accountPage } from '../pages/account-page.js';
import { FORM_EXPIRED } from '../pages/error-page.js';
import { signedOutPage } from '../pages/logout-pages.js';
import { hashPassword } from '../passwords.js';
import { revokeUserClientTokens, revokeUserTokens } from '../tokens/access-token-records.js';
import { credentialStamp, currentCredentialStamp, verifyUserCredentials } from '../user-credentials.js';
import { redirect, requestParams, sendPage, singleParam } from './page-reply.js';

const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * /oauth/account: the signed-in user's own page. The password changes here (the REST `password` field is
 * for administrators), every application holding a grant of the user's is listed and can be withdrawn
 * here (which ends that application's tokens), and "sign out everywhere" ends every session and token of
 * the user.
 */
export function registerAccountPages(scope: FastifyInstance, deps: PageDeps): void {
  scope.get('/oauth/account', async (request, reply) => {
    const signedIn = await deps.sessions.current(request.headers.cookie);
    if (!signedIn) return redirect(reply, '/oauth/login');
    return showAccount(deps, reply, signedIn, request, { notice: null, error: null });
  });

  scope.post('/oauth/account/password', async (request, reply) => {
    const form = requestParams(request);
    const context = await formContext(deps, request, form, 'account:password');
    if (!context) return sendPage(reply, FORM_EXPIRED);
    const { signedIn } = context;
    if (await refuseWithoutPassword(deps, request, reply, signedIn, singleParam(form, 'current_password') ?? '')) return reply;
    const next = singleParam(form, 'new_password') ?? '';
    if (next.length < 12 || next.length > 256 || CONTROL.test(next)) {
      return showAccount(deps, reply, signedIn, request, { notice: null, error: 'The new password must have 12 to 256 characters and no control characters.', status: 400 });
    }
    const now = new Date(deps.clock()).toISOString();
    const passwordHash = await hashPassword(next);
    // Every token, refresh family and session of the user ends; this browser gets a fresh session.
    await deps.db.transaction().execute(async (trx) => {
      await updatePasswordHash(trx, signedIn.user.id, passwordHash, now);
      await revokeUserTokens(trx, signedIn.user.id, now);
    });
    deps.forgetUser(signedIn.user.id);
    recordAccount(deps, request.id, signedIn, 'account.password');
    const started = await deps.sessions.start(signedIn.user.id);
    const renewed = { ...signedIn, sessionId: started.sessionId };
    // The change ended every known-device cookie of the account (they are bound to the password); this
    // browser, which just proved the current one, is known again.
    const cookies = [started.setCookie, deps.knownDevices.remember(signedIn.user.email, credentialStamp(passwordHash))];
    return showAccount(deps, reply, renewed, request, { notice: 'Your password was changed. Other devices and applications were signed out.', error: null }, cookies);
  });

  // The sign-in email changes here, behind the current password, and not through the API (policy.yaml
  // protects `email` from everyone but admins): a token alone, stolen or granted to an application, must
  // not be able to move the account to another address, and whether an address has an account is told
  // only to someone who knows this account's password.
  scope.post('/oauth/account/email', async (request, reply) => {
    const form = requestParams(request);
    const context = await formContext(deps, request, form, 'account:email');
    if (!context) return sendPage(reply, FORM_EXPIRED);
    const { signedIn } = context;
    if (await refuseWithoutPassword(deps, request, reply, signedIn, singleParam(form, 'current_password') ?? '')) return reply;
    const email = singleParam(form, 'new_email') ?? '';
    if (!validEmail(email)) {
      return showAccount(deps, reply, signedIn, request, { notice: null, error: 'The new email address is not a valid address (at most 254 characters).', status: 400 });
    }
    const now = new Date(deps.clock()).toISOString();
    try {
      await updateUserEmail(deps.db, signedIn.user.id, email, now);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      return showAccount(deps, reply, signedIn, request, { notice: null, error: 'Another account uses that email address.', status: 409 });
    }
    deps.forgetUser(signedIn.user.id);
    recordAccount(deps, request.id, signedIn, 'account.email');
    const changed = { ...signedIn, user: { ...signedIn.user, email, updatedAt: now } };
    return showAccount(deps, reply, changed, request, { notice: `You now sign in as ${email}.`, error: null });
  });

  scope.post('/oauth/account/applications/revoke', async (request, reply) => {
    const form = requestParams(request);
    const context = await formContext(deps, request, form, 'account:revoke');
    if (!context) return sendPage(reply, FORM_EXPIRED);
    const { signedIn } = context;
    const application = singleParam(form, 'application') ?? '';
    const now = new Date(deps.clock()).toISOString();
    // Only an application the page lists: one holding a consent, a refresh family or a live token of the
    // user's. Its consent is forgotten and its tokens, families, unredeemed codes and approved devices end.
    const removed = (await listUserApplications(deps.db, signedIn.user.id, now)).some((app) => app.clientRegistrationId === application);
    if (removed) {
      await deps.db.transaction().execute(async (trx) => {
        await deleteConsent(trx, signedIn.user.id, application);
        await revokeUserClientTokens(trx, signedIn.user.id, application, now);
      });
      deps.forgetUser(signedIn.user.id);
      recordAccount(deps, request.id, signedIn, 'account.revoke_application');
    }
    return showAccount(deps, reply, signedIn, request, { notice: removed ? 'The application no longer has access.' : null, error: null });
  });

  scope.post('/oauth/account/sign-out-everywhere', async (request, reply) => {
    const context = await formContext(deps, request, requestParams(request), 'account:everywhere');
    if (!context) return sendPage(reply, FORM_EXPIRED);
    const { signedIn } = context;
    await deps.db.transaction().execute((trx) => revokeUserTokens(trx, signedIn.user.id, new Date(deps.clock()).toISOString()));
    deps.forgetUser(signedIn.user.id);
    recordAccount(deps, request.id, signedIn, 'account.sign_out_everywhere');
    return sendPage(reply, signedOutPage(), [await deps.sessions.end(signedIn.sessionId)]);
  });
}

/**
 * The current password, checked under the sign-in throttle (a stolen session must not be a way to guess
 * it): false when it is right, else true once the account page with the refusal is sent. (A boolean, not
 * the reply: a reply is a thenable, which an async function's result would be resolved through.)
 */
async function refuseWithoutPassword(deps: PageDeps, request: FastifyRequest, reply: FastifyReply, signedIn: SignedIn, current: string): Promise<boolean> {
  const knownDevice = await deps.knownDevices.recognizeCurrent(request.headers.cookie, signedIn.user.email, (account) => currentCredentialStamp(deps.db, account));
  const attempt = { account: signedIn.user.email, address: request.ip, knownDevice };
  const outcome = await deps.throttle.attempt(attempt, async () => (current.length > 256 ? null : verifyUserCredentials(deps.db, signedIn.user.email, current)));
  if (outcome.throttled) {
    reply.header('retry-after', String(outcome.retryAfterSeconds));
    await showAccount(deps, reply, signedIn, request, { notice: null, error: 'Too many wrong passwords; try again later.', status: 429 });
    return true;
  }
  if (outcome.value !== null) return false;
  await showAccount(deps, reply, signedIn, request, { notice: null, error: 'The current password is wrong.', status: 400 });
  return true;
}

/** The contract's rule for a user's email (`UserReplace.email`: its format and length), as the API applies it. */
const emailField = (() => {
  const schema = routes.find((route) => route.operationId === 'replaceUser')?.schema.body as { properties?: { email?: object } } | undefined;
  if (schema?.properties?.email === undefined) throw new Error('the contract has no email field for replaceUser');
  return partValidator({ type: 'object', required: ['email'], properties: { email: schema.properties.email } }, 'body');
})();

function validEmail(email: string): boolean {
  return emailField({ email });
}

async function formContext(deps: PageDeps, request: FastifyRequest, form: URLSearchParams, purpose: string): Promise<{ signedIn: SignedIn } | null> {
  const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
  if (!binding.presented || !deps.csrf.verify(singleParam(form, 'csrf_token'), binding.browser, purpose)) return null;
  const signedIn = await deps.sessions.current(request.headers.cookie);
  return signedIn ? { signedIn } : null;
}

async function showAccount(
  deps: PageDeps,
  reply: FastifyReply,
  signedIn: SignedIn,
  request: FastifyRequest,
  messages: { notice: string | null; error: string | null; status?: number },
  cookies: string[] = [],
): Promise<FastifyReply> {
  const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
  const csrf = (purpose: string) => deps.csrf.issue(binding.browser, purpose);
  const applications = await listUserApplications(deps.db, signedIn.user.id, new Date(deps.clock()).toISOString());
  return sendPage(
    reply,
    accountPage({
      email: signedIn.user.email,
      name: signedIn.user.name,
      applications,
      csrf: { password: csrf('account:password'), email: csrf('account:email'), revoke: csrf('account:revoke'), everywhere: csrf('account:everywhere'), logout: csrf('logout') },
      ...messages,
    }),
    [binding.setCookie, ...cookies],
  );
}

function recordAccount(deps: PageDeps, requestId: string, signedIn: SignedIn, operation: string): void {
  deps.audit.record({
    requestId,
    interface: 'oauth',
    operation,
    subject: signedIn.user.id,
    clientId: null,
    resourceType: 'user',
    resourceId: signedIn.user.id,
    decision: 'allow',
    reason: 'authenticated',
  });
}
