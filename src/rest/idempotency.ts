import { createHmac, hkdfSync } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import { ApiError } from '../errors/registry.js';
import type { MaybePromise } from '../policy/maybe-promise.js';
import type { TokenPrincipal } from '../policy/principal.js';
import {
  claimIdempotencyKey,
  completeIdempotencyKey,
  releaseIdempotencyKey,
} from '../storage/idempotency-keys.js';
import type { Database } from '../storage/schema.js';
import type { HandlerResponse } from './representation.js';
import type { RestExchange } from './rest-exchange.js';

/** How long a completed key replays its response, counted from its claim. */
export const RETENTION_MS = 24 * 3600 * 1000;
/**
 * How long a claimed key whose response was never stored (status 0) holds: after it, the key is free and a
 * retry runs the operation again. Far longer than a request runs once it has arrived (the claim is made
 * after the body is read, so REQUEST_TIMEOUT_SECONDS does not count): each statement waits at most 5 s for
 * a pooled connection or SQLite's write lock, and shutdown closes requests still running after
 * SHUTDOWN_DRAIN_MS (15 s). So a key still pending after it is one whose first request ended without its
 * outcome being recorded (the completion below failed every attempt, or the process died). Freeing it is
 * the trade-off that spares the client a day of 409s: that is the one case where a retry can repeat the
 * operation. (A PostgreSQL that stops answering mid-statement can hold a request longer; such a request's
 * late completion is refused, see completeIdempotencyKey, but what it created stays.)
 */
export const PENDING_MS = 2 * 60 * 1000;
/**
 * Waits before the second and third attempts to store the response: 250 ms in all, to ride out a brief
 * outage (each attempt may itself wait up to 5 s for a pooled connection on PostgreSQL).
 */
const COMPLETION_BACKOFF_MS = [50, 200];
// Expired keys are replaced when reused and removed by the maintenance job (src/maintenance/).

/** The body as it may be kept for a replay: a secret shown once (a client secret) is left out. */
function withoutSecrets(response: HandlerResponse): unknown {
  const { body, secrets } = response;
  if (!secrets || secrets.length === 0 || body === null || typeof body !== 'object') return body;
  const kept = { ...(body as Record<string, unknown>) };
  for (const name of secrets) delete kept[name];
  return kept;
}

/**
 * The key of the request fingerprint's HMAC. A request body may hold a password (POST /v1/users): an
 * unkeyed SHA-256 of it in `idempotency_keys` would let anyone who reads the table guess the password at
 * hash speed, around scrypt. Derived from KEY_ENCRYPTION_SECRET, which the database never holds.
 */
export function idempotencyHashKey(keyEncryptionSecret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', keyEncryptionSecret, 'portcullis/idempotency', 'request fingerprint v1', 32));
}

/**
 * `Idempotency-Key` on POST (draft-ietf-httpapi-idempotency-key-header): the same key and body replay the
 * first response; the same key with another body is 422; a key still in flight is 409. Keys are scoped to
 * the client and the subject and kept for 24 hours. Failed first attempts release the key; a first attempt
 * whose response cannot be stored leaves the key pending for PENDING_MS. A response's secrets are never
 * stored: its replay answers without them.
 */
export function runIdempotent(
  db: Kysely<Database>,
  hashKey: Buffer,
  ex: RestExchange,
  run: () => MaybePromise<HandlerResponse>,
): MaybePromise<HandlerResponse & { replayed?: boolean }> {
  const key = ex.headers['idempotency-key'];
  // Anything but a keyed POST runs as it is: no wrapping on every GET.
  if (ex.method !== 'POST' || typeof key !== 'string' || ex.principal.kind === 'anonymous') return run();
  return runWithKey(db, hashKey, ex, ex.principal, key, run);
}

async function runWithKey(
  db: Kysely<Database>,
  hashKey: Buffer,
  ex: RestExchange,
  principal: TokenPrincipal,
  key: string,
  run: () => MaybePromise<HandlerResponse>,
): Promise<HandlerResponse & { replayed: boolean }> {
  // By registration and resource id, never by the reusable client_id: a client registered again under an
  // old client_id must not be answered with its predecessor's stored responses.
  const scope = `${principal.clientRegistrationId} ${principal.id}`;
  const requestHash = createHmac('sha256', hashKey).update(`${ex.route.operationId}\n${ex.path}\n${JSON.stringify(ex.body ?? null)}`).digest('hex');
  const now = Date.now();
  const claimedAt = new Date(now).toISOString();
  const existing = await claimIdempotencyKey(db, {
    scope,
    key,
    requestHash,
    createdAt: claimedAt,
    expiresAt: new Date(now + PENDING_MS).toISOString(),
  });
  if (existing) {
    if (existing.requestHash !== requestHash) throw new ApiError('IDEMPOTENCY_KEY_REUSED');
    if (existing.status === 0) throw new ApiError('CONFLICT', 'A request with this Idempotency-Key is still being processed.');
    return {
      status: existing.status,
      body: existing.body === null ? undefined : JSON.parse(existing.body),
      headers: existing.location ? { location: existing.location } : {},
      replayed: true,
    };
  }
  let response: HandlerResponse;
  try {
    response = await run();
  } catch (error) {
    await releaseIdempotencyKey(db, scope, key, claimedAt);
    throw error;
  }
  await completeWithRetries(db, scope, key, claimedAt, {
    status: response.status,
    location: response.headers?.location ?? null,
    body: response.body === undefined ? null : JSON.stringify(withoutSecrets(response)),
    expiresAt: new Date(now + RETENTION_MS).toISOString(),
  });
  return { ...response, replayed: false };
}

/**
 * The operation has committed: storing its response is what makes a retry a replay, so a failure (the
 * database briefly unreachable, no pooled connection in time) is tried again before the request gives up.
 * If every attempt fails the client gets that error and the key stays pending until PENDING_MS is over.
 */
async function completeWithRetries(
  db: Kysely<Database>,
  scope: string,
  key: string,
  claimedAt: string,
  response: Parameters<typeof completeIdempotencyKey>[4],
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await completeIdempotencyKey(db, scope, key, claimedAt, response);
      return;
    } catch (error) {
      const wait = COMPLETION_BACKOFF_MS[attempt];
      if (wait === undefined) throw error;
      await delay(wait);
    }
  }
}
