import type { Kysely } from 'kysely';
import type { ClientRecord } from '../../storage/clients.js';
import { findDeviceCode, recordDevicePoll } from '../../storage/device-codes.js';
import type { Database } from '../../storage/schema.js';
import { DEVICE_CODE } from '../device/device-authorization.js';
import { OAuthError } from '../oauth-error.js';
import { digestSecret } from '../secrets.js';
import type { CheckedGrant } from './grant-commit.js';

/** RFC 8628 §3.5: each slow_down adds five seconds to the interval. */
const SLOW_DOWN_STEP_SECONDS = 5;

/**
 * RFC 8628 §3.4–3.5: the device polls until the user answers: authorization_pending, slow_down when it
 * polls faster than its interval, access_denied, expired_token; an approved code is redeemed once.
 */
export async function grantDeviceCode(db: Kysely<Database>, client: ClientRecord, params: Readonly<Record<string, string>>, now: number): Promise<CheckedGrant> {
  if (!client.grantTypes.includes(DEVICE_CODE)) throw new OAuthError('unauthorized_client', 'The client may not use the device authorization grant.');
  const presented = params.device_code;
  if (presented === undefined) throw new OAuthError('invalid_request', 'device_code is required.');
  const hash = digestSecret(presented);
  const row = await findDeviceCode(db, hash);
  if (!row || row.clientRegistrationId !== client.id) throw new OAuthError('invalid_grant', 'The device code is not valid.');
  if (row.status === 'redeemed') throw new OAuthError('invalid_grant', 'The device code was already used.');
  if (Date.parse(row.expiresAt) <= now) throw new OAuthError('expired_token', 'The device code has expired; start again.');
  if (row.status === 'denied') throw new OAuthError('access_denied', 'The user denied the request.');
  if (row.status === 'pending') {
    const tooSoon = row.lastPolledAt !== null && now - Date.parse(row.lastPolledAt) < row.intervalSeconds * 1000;
    const interval = tooSoon ? row.intervalSeconds + SLOW_DOWN_STEP_SECONDS : row.intervalSeconds;
    await recordDevicePoll(db, hash, new Date(now).toISOString(), interval);
    if (tooSoon) throw new OAuthError('slow_down', `Poll at most every ${interval} seconds.`);
    throw new OAuthError('authorization_pending', 'The user has not answered yet.');
  }
  if (row.userId === null) throw new OAuthError('invalid_grant', 'The device code is not valid.');
  return {
    client,
    userId: row.userId,
    scopes: row.scopes.split(' ').filter((scope) => client.scopes.includes(scope)),
    grantId: row.grantId,
    grantType: DEVICE_CODE,
    authTime: Math.floor(Date.parse(row.authTime ?? new Date(now).toISOString()) / 1000),
    nonce: null,
    declinedScopes: row.declinedScopes?.split(' ') ?? [],
    claim: async (store, user) => {
      if (!(await store.redeemDeviceCode(hash))) {
        // Redeemed by a concurrent poll, or the approval ended since it was read (the user signed out everywhere).
        if ((await store.deviceCodeStatus(hash)) === 'denied') return new OAuthError('access_denied', 'The user denied the request.');
        return new OAuthError('invalid_grant', 'The device code was already used.');
      }
      if (!user || !user.active) return new OAuthError('invalid_grant', 'The user who approved the device can no longer sign in.');
      return null;
    },
  };
}
