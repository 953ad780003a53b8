import type { Kysely } from 'kysely';
import { addressKey } from '../../limits/address-key.js';
import type { ClientRecord } from '../../storage/clients.js';
import { countPendingDeviceCodes, insertDeviceCode, lockPendingDeviceCodes } from '../../storage/device-codes.js';
import { newId } from '../../storage/ids.js';
import type { Database } from '../../storage/schema.js';
import { isUniqueViolation } from '../../storage/unique-violation.js';
import { writeTransaction } from '../../storage/write-transaction.js';
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
/**
 * Device codes of one client registration that one address (limits/address-key.ts: an IPv4 address, or the
 * /64 of an IPv6 one) may have waiting at once. The address's OAuth budget alone (120 requests a minute by
 * default) let it hold 1,200 of the client's codes for their ten minutes, so nine addresses kept the
 * client's MAX_PENDING_DEVICE_CODES full and every other device of the client was refused; with this bound
 * that takes 500. Twenty still serves a household or an office behind one NAT: several devices started at
 * once, each perhaps started again when its user was slow (a code nobody entered keeps counting until it
 * expires).
 */
export const MAX_PENDING_DEVICE_CODES_PER_ADDRESS = 20;

export interface DeviceAuthorization {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

/**
 * RFC 8628 §3.1–3.2: a device code for the device to poll with, a user code for the user to type.
 * `sourceAddress` is the address the request came from.
 */
export async function startDeviceAuthorization(
  db: Kysely<Database>,
  issuer: string,
  client: ClientRecord,
  scopeParameter: string | undefined,
  sourceAddress: string,
  now: number,
): Promise<DeviceAuthorization> {
  if (!client.grantTypes.includes(DEVICE_CODE)) throw new OAuthError('unauthorized_client', 'The client may not use the device authorization grant.');
  if (scopeParameter === undefined) throw new OAuthError('invalid_scope', SCOPE_REQUIRED);
  const scopes = parseScope(scopeParameter);
  checkScopesAllowed(scopes, client.scopes);
  const requester = addressKey(sourceAddress);
  const createdAt = new Date(now).toISOString();
  const deviceCode = generateSecret();
  // A collision with a live user code is retried; 20^8 codes make a second one practically impossible.
  for (let attempt = 0; attempt < 5; attempt++) {
    const userCode = generateUserCode();
    try {
      await writeTransaction(db, async (trx) => {
        await checkRoomForDeviceCode(trx, client.id, requester, createdAt);
        await insertDeviceCode(trx, {
          deviceCodeHash: digestSecret(deviceCode),
          userCode,
          grantId: newId(),
          clientId: client.clientId,
          clientRegistrationId: client.id,
          addressKey: requester,
          scopes: scopes.join(' '),
          status: 'pending',
          userId: null,
          authTime: null,
          intervalSeconds: DEVICE_POLL_INTERVAL_SECONDS,
          lastPolledAt: null,
          createdAt,
          expiresAt: new Date(now + DEVICE_CODE_TTL_SECONDS * 1000).toISOString(),
        });
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

/**
 * Refuses another code while the requesting address, or the client as a whole, has as many waiting as it
 * may. It counts under the registration's lock, in the transaction that then adds the code, so that
 * parallel requests cannot each count the same codes and together pass either bound. RFC 8628 §3.2 has this
 * endpoint answer errors as the token endpoint does (RFC 6749 §5.2); `slow_down` belongs to the device's
 * polling (§3.5) and has no meaning here, so both bounds answer `temporarily_unavailable`, 429 with
 * Retry-After: a code frees its place once its user answers or it expires.
 */
async function checkRoomForDeviceCode(trx: Kysely<Database>, clientRegistrationId: string, requester: string, now: string): Promise<void> {
  await lockPendingDeviceCodes(trx, clientRegistrationId);
  if ((await countPendingDeviceCodes(trx, clientRegistrationId, now, requester)) >= MAX_PENDING_DEVICE_CODES_PER_ADDRESS) {
    throw new OAuthError('temporarily_unavailable', 'Too many device codes of this client requested from this address are waiting for their users; retry in a minute.', 429, {
      'retry-after': '60',
    });
  }
  if ((await countPendingDeviceCodes(trx, clientRegistrationId, now)) >= MAX_PENDING_DEVICE_CODES) {
    throw new OAuthError('temporarily_unavailable', 'Too many device codes of this client are waiting for their users; retry in a minute.', 429, { 'retry-after': '60' });
  }
}
