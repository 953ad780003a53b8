import type { Kysely } from 'kysely';
import type { ClientRecord } from '../../storage/clients.js';
import { countPendingDeviceCodes, insertDeviceCode } from '../../storage/device-codes.js';
import { newId } from '../../storage/ids.js';
import type { Database } from '../../storage/schema.js';
import { isUniqueViolation } from '../../storage/unique-violation.js';
import { OAuthError } from '../oauth-error.js';
import { checkScopesAllowed, parseScope, SCOPE_REQUIRED } from '../scope-parameter.js';
import { digestSecret, generateSecret } from '../secrets.js';
import { displayUserCode, generateUserCode } from './user-code.js';

export const DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code';
/** RFC 8628 §3.2: how long the codes live, and how long a device waits between polls (5 s, the default). */
export const DEVICE_CODE_TTL_SECONDS = 600;
export const DEVICE_POLL_INTERVAL_SECONDS = 5;
/**
 * Device codes one client registration may have waiting at once. Anyone may ask for a public client's
 * codes; the per-address budget bounds one caller, this bounds the rows all callers together can make.
 */
export const MAX_PENDING_DEVICE_CODES = 10_000;

export interface DeviceAuthorization {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

/** RFC 8628 §3.1–3.2: a device code for the device to poll with, a user code for the user to type. */
export async function startDeviceAuthorization(
  db: Kysely<Database>,
  issuer: string,
  client: ClientRecord,
  scopeParameter: string | undefined,
  now: number,
): Promise<DeviceAuthorization> {
  if (!client.grantTypes.includes(DEVICE_CODE)) throw new OAuthError('unauthorized_client', 'The client may not use the device authorization grant.');
  if (scopeParameter === undefined) throw new OAuthError('invalid_scope', SCOPE_REQUIRED);
  const scopes = parseScope(scopeParameter);
  checkScopesAllowed(scopes, client.scopes);
  if ((await countPendingDeviceCodes(db, client.id, new Date(now).toISOString())) >= MAX_PENDING_DEVICE_CODES) {
    throw new OAuthError('temporarily_unavailable', 'Too many device codes of this client are waiting for their users; retry in a minute.', 429, { 'retry-after': '60' });
  }
  const deviceCode = generateSecret();
  // A collision with a live user code is retried; 20^8 codes make a second one practically impossible.
  for (let attempt = 0; attempt < 5; attempt++) {
    const userCode = generateUserCode();
    try {
      await insertDeviceCode(db, {
        deviceCodeHash: digestSecret(deviceCode),
        userCode,
        grantId: newId(),
        clientId: client.clientId,
        clientRegistrationId: client.id,
        scopes: scopes.join(' '),
        status: 'pending',
        userId: null,
        authTime: null,
        intervalSeconds: DEVICE_POLL_INTERVAL_SECONDS,
        lastPolledAt: null,
        createdAt: new Date(now).toISOString(),
        expiresAt: new Date(now + DEVICE_CODE_TTL_SECONDS * 1000).toISOString(),
      });
    } catch (error) {
      if (isUniqueViolation(error)) continue;
      throw error;
    }
    const shown = displayUserCode(userCode);
    return {
      device_code: deviceCode,
      user_code: shown,
      verification_uri: `${issuer}/oauth/device`,
      verification_uri_complete: `${issuer}/oauth/device?user_code=${shown}`,
      expires_in: DEVICE_CODE_TTL_SECONDS,
      interval: DEVICE_POLL_INTERVAL_SECONDS,
    };
  }
  throw new Error('Could not allocate a unique user code');
}
