import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { deleteConsent } from '../../storage/consents.js';
import { listUserApplications } from '../../storage/user-applications.js';
import { routes } from '../../../generated/routes.js';
import { partValidator } from '../../rest/validation.js';
import { nextVersion } from '../../storage/ids.js';
import { findLiveLoginSession } from '../../storage/login-sessions.js';
import { lockUser } from '../../storage/row-locks.js';
import type { Database } from '../../storage/schema.js';
import { isUniqueViolation } from '../../storage/unique-violation.js';
import { updatePasswordHash, updateUserEmail } from '../../storage/users.js';
import { writeTransaction } from '../../storage/write-transaction.js';
import type { PageDeps } from '../browser/page-deps.js';
import { browserBinding, type SignedIn } from '../browser/sign-in-sessions.js';
import { accountPage } from '../pages/account-page.js';
import { FORM_EXPIRED } from '../pages/error-page.js';
import { signedOutPage } from '../pages/logout-pages.js';
import { hashPassword } from '../passwords.js';
import { revokeUserClientTokens, revokeUserTokens } from '../tokens/access-token-records.js';
import { checkUserCredentials, credentialStamp, currentCredentialStamp } from '../user-credentials.js';
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
    const checked = await checkCurrentPassword(deps, request, reply, signedIn, singleParam(form, 'current_password') ?? '');
    if (checked === null) return reply;
    const next = singleParam(form, 'new_password') ?? '';
    if (next.length < 12 || next.length > 256 || CONTROL.test(next)) {
      return showAccount(deps, reply, signedIn, request, { notice: null, error: 'The new password must have 12 to 256 characters and no control characters.', status: 400 });
    }
    const passwordHash = await hashPassword(next);
    // Every token, refresh family and session of the user ends; this browser gets a fresh session, stored
    // under the same lock, so that a reset or deactivation committed after the change also ends it.
    const session = await changeIfUnchanged(deps, signedIn, checked, async (trx, version) => {
      await updatePasswordHash(trx, signedIn.user.id, passwordHash, version);
      await revokeUserTokens(trx, signedIn.user.id, new Date(deps.clock()).toISOString());
      return deps.sessions.startWithin(trx, signedIn.user.id);
    });
    if (session === null) return formExpired(deps, request, reply, signedIn, 'account.password');
    deps.forgetUser(signedIn.user.id);
    recordAccount(deps, request.id, signedIn, 'account.password');
    const renewed = { ...signedIn, sessionId: session.sessionId };
    // The change ended every known-device cookie of the account (they are bound to the password); this
    // browser, which just proved the current one, is known again.
    const cookies = [session.setCookie, deps.knownDevices.remember(signedIn.user.email, credentialStamp(passwordHash))];
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
    const checked = await checkCurrentPassword(deps, request, reply, signedIn, singleParam(form, 'current_password') ?? '');
    if (checked === null) return reply;
    const email = singleParam(form, 'new_email') ?? '';
    if (!validEmail(email)) {
      return showAccount(deps, reply, signedIn, request, { notice: null, error: 'The new email address is not a valid address (at most 254 characters).', status: 400 });
    }
    let changed: string | null;
    try {
      changed = await changeIfUnchanged(deps, signedIn, checked, (trx, version) => updateUserEmail(trx, signedIn.user.id, email, version).then(() => version));
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      // Not an authorization decision (the password was right): recorded under its own name.
      recordAccount(deps, request.id, signedIn, 'account.email_taken');
      return showAccount(deps, reply, signedIn, request, { notice: null, error: 'Another account uses that email address.', status: 409 });
    }
    if (changed === null) return formExpired(deps, request, reply, signedIn, 'account.email');
    deps.forgetUser(signedIn.user.id);
    recordAccount(deps, request.id, signedIn, 'account.email');
    const moved = { ...signedIn, user: { ...signedIn.user, email, updatedAt: changed } };
    // A known-device cookie names the email it was earned under: this browser, which just proved the
    // password, stays known under the new one.
    const cookies = [deps.knownDevices.remember(email, checked.credentialStamp)];
    return showAccount(deps, reply, moved, request, { notice: `You now sign in as ${email}.`, error: null }, cookies);
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

/** What the current password's check read: the user's version then, and the password's stamp. */
interface CheckedPassword {
  updatedAt: string;
  revocations: number;
  credentialStamp: string;
}

/**
 * The current password, checked under the sign-in throttle (a stolen session must not be a way to guess
 * it; each refusal is recorded as the user's): what the check read when it is right, else null once the
 * account page with the refusal is sent. (Not the reply itself: a reply is a thenable, which an async
 * function's result would be resolved through.)
 */
async function checkCurrentPassword(deps: PageDeps, request: FastifyRequest, reply: FastifyReply, signedIn: SignedIn, current: string): Promise<CheckedPassword | null> {
  const knownDevice = await deps.knownDevices.recognizeCurrent(request.headers.cookie, signedIn.user.email, (account) => currentCredentialStamp(deps.db, account));
  const attempt = { account: signedIn.user.email, address: request.ip, knownDevice };
  const outcome = await deps.throttle.attempt(attempt, async () => (current.length > 256 ? null : checkUserCredentials(deps.db, signedIn.user.email, current)));
  if (!outcome.throttled && outcome.value !== null && outcome.value.user.id === signedIn.user.id) {
    return { updatedAt: outcome.value.user.updatedAt, revocations: outcome.value.revocations, credentialStamp: outcome.value.credentialStamp };
  }
  if (outcome.throttled) {
    // Refused before any password was checked: the throttle bounds these, and they are not recorded one by one.
    reply.header('retry-after', String(outcome.retryAfterSeconds));
    await showAccount(deps, reply, signedIn, request, { notice: null, error: 'Too many wrong passwords; try again later.', status: 429 });
  } else {
    recordAccount(deps, request.id, signedIn, 'account.password_check', 'deny');
    await showAccount(deps, reply, signedIn, request, { notice: null, error: 'The current password is wrong.', status: 400 });
  }
  return null;
}

/** A change refused because the user or the session changed since the password check: recorded, then the expired-form page. */
function formExpired(deps: PageDeps, request: FastifyRequest, reply: FastifyReply, signedIn: SignedIn, operation: string): FastifyReply {
  recordAccount(deps, request.id, signedIn, operation, 'deny');
  return sendPage(reply, FORM_EXPIRED);
}

/**
 * Makes a change the current password was checked for, under the user's lock, only if nothing changed
 * since the check read the user (`updatedAt`: another password or email change, a deactivation) and this
 * browser's session is still live (signing out everywhere, or a password change elsewhere, ended it):
 * the scrypt check takes long enough for either to commit meanwhile. The change is given the user's next
 * version (`updatedAt`, never the one it replaces, so that a write that read the old one sees it). What
 * the change answers, or null when something did.
 */
async function changeIfUnchanged<T>(
  deps: PageDeps,
  signedIn: SignedIn,
  checked: CheckedPassword,
  change: (trx: Kysely<Database>, version: string) => Promise<T>,
): Promise<T | null> {
  await deps.beforeAccountChange?.();
  return writeTransaction(deps.db, async (trx) => {
    const user = await lockUser(trx, signedIn.user.id);
    // `revocations` too: two changes within one millisecond would leave `updatedAt` as it was.
    if (!user || !user.active || user.updatedAt !== checked.updatedAt || user.revocations !== checked.revocations) return null;
    if ((await findLiveLoginSession(trx, signedIn.sessionId, new Date(deps.clock()).toISOString())) === null) return null;
    return change(trx, nextVersion(user.updatedAt, deps.clock()));
  });
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

/** The user's own decision on their account: allowed, or refused (a wrong current password, an email taken). */
function recordAccount(deps: PageDeps, requestId: string, signedIn: SignedIn, operation: string, decision: 'allow' | 'deny' = 'allow'): void {
  deps.audit.record({
    requestId,
    interface: 'oauth',
    operation,
    subject: signedIn.user.id,
    clientId: null,
    resourceType: 'user',
    resourceId: signedIn.user.id,
    decision,
    reason: decision === 'allow' ? 'authenticated' : 'authentication',
  });
}
