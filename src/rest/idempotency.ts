import { createHmac, hkdfSync } from 'node:crypto';
import type { Kysely } from 'kysely';
import { ApiError } from '../errors/registry.js';
import type { TokenPrincipal } from '../policy/principal.js';
import {
  claimIdempotencyKey,
  completeIdempotencyKey,
  releaseIdempotencyKey,
} from '../storage/idempotency-keys.js';
import type { Database } from '../storage/schema.js';
import type { HandlerResponse } from './representation.js';
import type { RestExchange } from './rest-exchange.js';

const RETENTION_MS = 24 * 3600 * 1000;
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
 * the client and the subject and kept for 24 hours. Failed first attempts release the key. A response's
 * secrets are never stored: its replay answers without them.
 */
export function runIdempotent(
  db: Kysely<Database>,
  hashKey: Buffer,
  ex: RestExchange,
  run: () => Promise<HandlerResponse>,
): Promise<HandlerResponse & { replayed?: boolean }> {
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
  run: () => Promise<HandlerResponse>,
): Promise<HandlerResponse & { replayed: boolean }> {
  // By registration and resource id, never by the reusable client_id: a client registered again under an
  // old client_id must not be answered with its predecessor's stored responses.
  const scope = `${principal.clientRegistrationId} ${principal.id}`;
  const requestHash = createHmac('sha256', hashKey).update(`${ex.route.operationId}\n${ex.path}\n${JSON.stringify(ex.body ?? null)}`).digest('hex');
  const now = Date.now();
  const existing = await claimIdempotencyKey(db, {
    scope,
    key,
    requestHash,
    createdAt: new Date(now).toISOString(),
    expiresAt: new Date(now + RETENTION_MS).toISOString(),
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
    await releaseIdempotencyKey(db, scope, key);
    throw error;
  }
  await completeIdempotencyKey(db, scope, key, {
    status: response.status,
    location: response.headers?.location ?? null,
    body: response.body === undefined ? null : JSON.stringify(withoutSecrets(response)),
  });
  return { ...response, replayed: false };
}
