import type { Kysely } from 'kysely';
import { addressKey } from '../../limits/address-key.js';
import type { ClientRecord } from '../../storage/clients.js';
import { insertDeviceCode, lockAddressDeviceCodes, lockPendingDeviceCodes, pendingDeviceCodes, type PendingDeviceCodes } from '../../storage/device-codes.js';
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
/**
 * How near MAX_PENDING_DEVICE_CODES the client's count must come before requests take the registration's
 * lock exclusively (checkRoomForDeviceCode), or the database's connection limit if that is larger. Far from
 * the bound they hold it shared: taken exclusively by every request, it made every request for a public
 * client's codes, anonymous ones included, wait for every other while holding a pooled connection.
 */
const CLIENT_LOCK_MARGIN = 1_000;

export interface DeviceAuthorization {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

/**
 * RFC 8628 §3.1–3.2: a device code for the device to poll with, a user code for the user to type, and
 * for the audit log the id of the grant the code starts and its scopes. `sourceAddress` is the address the
 * request came from; `clock` times the code once it is stored.
 */
export async function startDeviceAuthorization(
  db: Kysely<Database>,
  issuer: string,
  client: ClientRecord,
  scopeParameter: string | undefined,
  sourceAddress: string,
  clock: () => number,
): Promise<DeviceAuthorization & { grantId: string; scopes: string }> {
  if (!client.grantTypes.includes(DEVICE_CODE)) throw new OAuthError('unauthorized_client', 'The client may not use the device authorization grant.');
  if (scopeParameter === undefined) throw new OAuthError('invalid_scope', SCOPE_REQUIRED);
  const scopes = parseScope(scopeParameter);
  checkScopesAllowed(scopes, client.scopes);
  const requester = addressKey(sourceAddress);
  const deviceCode = generateSecret();
  const grantId = newId();
  // Far from the client's bound first; a request that finds the client near it is made again on that path.
  let nearTheBound = false;
  // A collision with a live user code is retried; 20^8 codes make a second one practically impossible.
  for (let attempt = 0; attempt < 5; attempt++) {
    const userCode = generateUserCode();
    const add = () =>
      writeTransaction(db, async (trx) => {
        await checkRoomForDeviceCode(trx, client.id, requester, new Date(clock()).toISOString(), nearTheBound);
        // Timed once the locks are held, not when the request arrived: near the bound a request may wait its
        // turn, and its code still lives the whole `expires_in` it is answered with.
        const now = clock();
        await insertDeviceCode(trx, {
          deviceCodeHash: digestSecret(deviceCode),
          userCode,
          grantId,
          clientId: client.clientId,
          clientRegistrationId: client.id,
          addressKey: requester,
          scopes: scopes.join(' '),
          status: 'pending',
          userId: null,
          authTime: null,
          intervalSeconds: DEVICE_POLL_INTERVAL_SECONDS,
          lastPolledAt: null,
          createdAt: new Date(now).toISOString(),
          declinedScopes: null,
          expiresAt: new Date(now + DEVICE_CODE_TTL_SECONDS * 1000).toISOString(),
        });
      });
    try {
      // Near the bound, this process's requests for the client also wait their turn in memory: one pooled
      // connection at a time waits for the registration's lock, whoever asks.
      await oneAtATime(db, `${client.id} ${requester}`, () => (nearTheBound ? oneAtATime(db, client.id, add, MAX_WAITING_NEAR_THE_BOUND) : add()));
    } catch (error) {
      if (error instanceof NearTheBound && !nearTheBound) {
        nearTheBound = true;
        attempt--;
        continue;
      }
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
      grantId,
      scopes: scopes.join(' '),
    };
  }
  throw new Error('Could not allocate a unique user code');
}

/** Thrown on the path far from the client's bound when the client turns out to be near it: made again there. */
class NearTheBound extends Error {}

/**
 * Refuses another code while the requesting address, or the client as a whole, has as many waiting as it
 * may; on PostgreSQL, the locks that make both bounds exact (on SQLite the write transaction already excludes
 * every other writer). Locks are taken address first, then the registration's, so no two transactions wait
 * on each other in a cycle.
 *
 * - The address's codes are counted under that address's lock, in the transaction that then adds the code,
 *   so that parallel requests cannot each count the same codes and together pass the bound.
 * - Far from the client's bound, a request holds the registration's lock shared, which requests far from
 *   it do not wait for each other for, and adds its code if the count under it is still far from the bound.
 * - Near the bound (within CLIENT_LOCK_MARGIN), it takes the registration's lock exclusively, which waits
 *   for every transaction holding it shared to end, and counts again: every code added is then counted.
 *   (Those far-path transactions counted below the margin, and no more of them can be in flight at once
 *   than the database has connections, so the margin is at least PostgreSQL's `max_connections`: the bound
 *   is exact however many processes share the database.) A client already full is refused on a count taken
 *   without waiting.
 *
 * RFC 8628 §3.2 has this endpoint answer errors as the token endpoint does (RFC 6749 §5.2); `slow_down`
 * belongs to the device's polling (§3.5) and has no meaning here, so both bounds answer
 * `temporarily_unavailable`, 429 with Retry-After: a code frees its place once its user answers or, at the
 * latest, when it expires, which is when Retry-After points to.
 */
async function checkRoomForDeviceCode(trx: Kysely<Database>, clientRegistrationId: string, requester: string, now: string, nearTheBound: boolean): Promise<void> {
  await lockAddressDeviceCodes(trx, clientRegistrationId, requester);
  const ofAddress = await pendingDeviceCodes(trx, clientRegistrationId, now, requester);
  if (ofAddress.count >= MAX_PENDING_DEVICE_CODES_PER_ADDRESS) {
    throw new OAuthError('temporarily_unavailable', 'Too many device codes of this client requested from this address are waiting for their users; retry after Retry-After seconds.', 429, {
      'retry-after': secondsUntilFreed(ofAddress, now),
    });
  }
  // Without waiting for any lock of the client's: already full is refused, near the bound changes path.
  let ofClient = await pendingDeviceCodes(trx, clientRegistrationId, now);
  if (ofClient.count >= MAX_PENDING_DEVICE_CODES) throw clientFull(ofClient, now);
  if (!nearTheBound) {
    if (ofClient.count >= MAX_PENDING_DEVICE_CODES - CLIENT_LOCK_MARGIN) throw new NearTheBound();
    const inFlight = await lockPendingDeviceCodes(trx, clientRegistrationId, 'shared');
    const margin = Math.max(CLIENT_LOCK_MARGIN, inFlight);
    if ((await pendingDeviceCodes(trx, clientRegistrationId, now)).count >= MAX_PENDING_DEVICE_CODES - margin) throw new NearTheBound();
    return;
  }
  await lockPendingDeviceCodes(trx, clientRegistrationId, 'exclusive');
  ofClient = await pendingDeviceCodes(trx, clientRegistrationId, now);
  if (ofClient.count >= MAX_PENDING_DEVICE_CODES) throw clientFull(ofClient, now);
}

function clientFull(ofClient: PendingDeviceCodes, now: string): OAuthError {
  return new OAuthError('temporarily_unavailable', 'Too many device codes of this client are waiting for their users; retry after Retry-After seconds.', 429, {
    'retry-after': secondsUntilFreed(ofClient, now),
  });
}

/** Whole seconds until the first waiting code expires (at least 1). */
function secondsUntilFreed(pending: PendingDeviceCodes, now: string): string {
  const left = pending.firstExpiry === null ? 0 : Date.parse(pending.firstExpiry) - Date.parse(now);
  return String(Math.max(1, Math.ceil(left / 1000)));
}

/**
 * Requests of one address for one client's codes, in this process and on this database, one at a time: on
 * PostgreSQL each would otherwise hold a pooled connection while it waits for the address's lock, so one
 * address sending many at once could take every connection of the pool. What waits here is a callback.
 * Near the client's bound its requests from every address take turns too, at most `maxWaiting` of them.
 */
const turns = new WeakMap<Kysely<Database>, Map<string, { tail: Promise<void>; queued: number }>>();

/**
 * Requests near a client's bound that may wait in one process for its turn: one at a time takes the
 * registration's lock exclusively, in a few statements, so a hundred is a fraction of a second of waiting.
 * Beyond it a request is refused at once (429, Retry-After 1) rather than held.
 */
const MAX_WAITING_NEAR_THE_BOUND = 100;

async function oneAtATime<T>(db: Kysely<Database>, key: string, work: () => Promise<T>, maxWaiting = Number.POSITIVE_INFINITY): Promise<T> {
  let ofDb = turns.get(db);
  if (ofDb === undefined) turns.set(db, (ofDb = new Map()));
  let line = ofDb.get(key);
  if (line !== undefined && line.queued >= maxWaiting) {
    throw new OAuthError('temporarily_unavailable', 'Too many requests for this client are waiting; retry in a second.', 429, { 'retry-after': '1' });
  }
  if (line === undefined) ofDb.set(key, (line = { tail: Promise.resolve(), queued: 0 }));
  const mine = line.tail.then(work);
  line.tail = mine.then(
    () => undefined,
    () => undefined,
  );
  line.queued++;
  try {
    return await mine;
  } finally {
    if (--line.queued === 0 && ofDb.get(key) === line) ofDb.delete(key);
  }
}
