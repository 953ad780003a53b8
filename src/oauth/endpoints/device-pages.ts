import type { FastifyInstance } from 'fastify';
import { findClientById, type ClientWithSecret } from '../../storage/clients.js';
import { rememberConsent } from '../../storage/consents.js';
import { decideDeviceCode, findDeviceCodeByUserCode, type DeviceCodeRow } from '../../storage/device-codes.js';
import { DEVICE_CODE } from '../device/device-authorization.js';
import type { PageDeps } from '../browser/page-deps.js';
import { browserBinding, lockSignedIn } from '../browser/sign-in-sessions.js';
import { writeTransaction } from '../../storage/write-transaction.js';
import { displayUserCode, normalizeUserCode } from '../device/user-code.js';
import { declined } from '../scopes.js';
import { consentPage } from '../pages/consent-page.js';
import { deviceDonePage, deviceEntryPage } from '../pages/device-pages.js';
import { FORM_EXPIRED } from '../pages/error-page.js';
import { redirect, requestParams, sendPage, singleParam } from './page-reply.js';

const UNKNOWN = 'That code is not valid or has expired. Check the code on your device.';

/**
 * The device flow's user side (RFC 8628 §3.3): GET /oauth/device asks for the code (or takes it from
 * verification_uri_complete), has the user sign in, and shows what the device asks for, each scope free
 * to untick; POST /oauth/device records the answer once. Wrong codes count against the address like wrong
 * passwords, so the 20^8 codes cannot be walked.
 */
export function registerDevicePages(scope: FastifyInstance, deps: PageDeps): void {
  scope.get('/oauth/device', async (request, reply) => {
    const entered = singleParam(requestParams(request), 'user_code');
    if (entered === undefined) return sendPage(reply, deviceEntryPage(null));
    const outcome = await deps.throttle.attempt({ account: null, address: request.ip }, async () => {
      const code = normalizeUserCode(entered);
      const found = code === null ? null : await findDeviceCodeByUserCode(deps.db, code);
      return found && found.status === 'pending' && Date.parse(found.expiresAt) > deps.clock() ? found : null;
    });
    if (outcome.throttled) {
      reply.header('retry-after', String(outcome.retryAfterSeconds));
      return sendPage(reply, deviceEntryPage(`Too many wrong codes. Try again in ${Math.ceil(outcome.retryAfterSeconds / 60)} minutes.`, 429));
    }
    const row = outcome.value;
    if (!row) {
      // A wrong code, like a wrong password: a refused credential, counted per address (audit-log.ts).
      deps.audit.record({
        requestId: request.id,
        sourceAddress: request.ip,
        interface: 'oauth',
        operation: 'device',
        subject: null,
        clientId: null,
        resourceType: null,
        resourceId: null,
        decision: 'deny',
        reason: 'authentication',
      });
      return sendPage(reply, deviceEntryPage(UNKNOWN, 400));
    }
    const signedIn = await deps.sessions.current(request.headers.cookie);
    if (!signedIn) return redirect(reply, `/oauth/login?user_code=${displayUserCode(row.userCode)}`);
    const client = await deviceClient(deps, row);
    if (!client) return sendPage(reply, deviceEntryPage(UNKNOWN, 400));
    const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
    return sendPage(
      reply,
      consentPage({
        action: '/oauth/device',
        hidden: { user_code: row.userCode, csrf_token: deps.csrf.issue(binding.browser, `device:${row.userCode}`) },
        clientName: client.name,
        userEmail: signedIn.user.email,
        scopes: row.scopes.split(' ').map((name) => ({ name, description: deps.scopeDescriptions[name] ?? name })),
        userCode: displayUserCode(row.userCode),
      }),
      [binding.setCookie],
    );
  });

  scope.post('/oauth/device', async (request, reply) => {
    const form = requestParams(request);
    const code = normalizeUserCode(singleParam(form, 'user_code') ?? '');
    const binding = browserBinding(deps.jar, request.headers.cookie, request.method);
    const browser = binding.presented ? binding.browser : null;
    if (code === null || !deps.csrf.verify(singleParam(form, 'csrf_token'), browser, `device:${code}`)) return sendPage(reply, FORM_EXPIRED);
    const signedIn = await deps.sessions.current(request.headers.cookie);
    if (!signedIn) return redirect(reply, `/oauth/login?user_code=${displayUserCode(code)}`);
    const row = await findDeviceCodeByUserCode(deps.db, code);
    if (!row || row.status !== 'pending' || Date.parse(row.expiresAt) <= deps.clock()) return sendPage(reply, deviceEntryPage(UNKNOWN, 400));
    // The client may have been deleted or changed since the page was shown: nothing is approved for it.
    if (!(await deviceClient(deps, row))) return sendPage(reply, deviceEntryPage(UNKNOWN, 400));
    const requested = row.scopes.split(' ');
    const ticked = new Set(form.getAll('scope'));
    const allowed = requested.filter((name) => ticked.has(name));
    const approved = singleParam(form, 'decision') === 'allow' && allowed.length > 0;
    const decision = {
      status: approved ? ('approved' as const) : ('denied' as const),
      userId: signedIn.user.id,
      authTime: new Date(signedIn.authTime * 1000).toISOString(),
      scopes: (approved ? allowed : requested).join(' '),
      // An unticked offline_access means no refresh token for the device (user-tokens.ts).
      declinedScopes: approved ? declined(requested, allowed) : null,
    };
    // An approval is stored only while the session that gives it is live (lockSignedIn): one stored after
    // "sign out everywhere" would let the device start a family afterwards.
    await deps.beforeCodeIssued?.();
    const recorded = await writeTransaction(deps.db, async (trx) => {
      if (approved && !(await lockSignedIn(trx, signedIn, deps.clock()))) return 'signed out';
      return (await decideDeviceCode(trx, row.deviceCodeHash, decision)) ? 'recorded' : 'answered already';
    });
    if (recorded === 'signed out') return redirect(reply, `/oauth/login?user_code=${displayUserCode(code)}`);
    if (recorded === 'answered already') return sendPage(reply, deviceEntryPage(UNKNOWN, 400));
    // The device is an application the user allowed: the account page lists it, and withdrawing it ends its tokens.
    if (approved) {
      await rememberConsent(
        deps.db,
        { userId: signedIn.user.id, clientRegistrationId: row.clientRegistrationId, clientId: row.clientId, scopes: [...allowed].sort().join(' '), grantedAt: new Date(deps.clock()).toISOString() },
        requested,
      );
    }
    deps.audit.record({
      requestId: request.id,
      interface: 'oauth',
      operation: 'device',
      subject: signedIn.user.id,
      clientId: row.clientId,
      resourceType: 'grant',
      resourceId: row.grantId,
      decision: approved ? 'allow' : 'deny',
      reason: approved ? 'granted' : 'consent',
      scopes: decision.scopes,
    });
    return sendPage(reply, deviceDonePage(approved));
  });
}

/**
 * The registration a device code was issued to, if it still may use the device grant and every scope the
 * device asked for. By registration id: a client_id deleted and registered again is another application.
 */
async function deviceClient(deps: PageDeps, row: DeviceCodeRow): Promise<ClientWithSecret | null> {
  const client = await findClientById(deps.db, row.clientRegistrationId);
  if (!client || client.clientId !== row.clientId || !client.grantTypes.includes(DEVICE_CODE)) return null;
  return row.scopes.split(' ').every((scope) => client.scopes.includes(scope)) ? client : null;
}
