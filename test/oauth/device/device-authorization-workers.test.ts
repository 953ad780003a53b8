import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEVICE_CODE, MAX_PENDING_DEVICE_CODES_PER_ADDRESS, startDeviceAuthorization } from '../../../src/oauth/device/device-authorization.js';
import { OAuthError } from '../../../src/oauth/oauth-error.js';
import { openDb, type Db } from '../../../src/storage/dialect.js';
import { migrateToLatest } from '../../../src/storage/migrate.js';
import { createClient, ISSUER } from '../fixtures.js';

// Several workers share one SQLite file (WORKERS=N): each counts the waiting codes on its own connection, so
// only the write lock taken before the count keeps two of them from counting the same codes.
describe('device codes waiting per address, with two workers on one SQLite file', () => {
  let dir: string;
  let workers: [Db, Db];

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-device-workers-'));
    const first = await openDb({ databaseUrl: null, dataDir: dir });
    await migrateToLatest(first);
    workers = [first, await openDb({ databaseUrl: null, dataDir: dir })];
  });
  afterEach(async () => {
    await Promise.all(workers.map((db) => db.close()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it(`starts exactly ${MAX_PENDING_DEVICE_CODES_PER_ADDRESS} codes for one address however the requests are spread over the workers`, async () => {
    const { client } = await createClient(workers[0], { type: 'public', secretHash: null, grantTypes: [DEVICE_CODE], scopes: ['read:posts'], role: null });
    const outcomes = await Promise.allSettled(
      Array.from({ length: MAX_PENDING_DEVICE_CODES_PER_ADDRESS + 10 }, (_, i) => startDeviceAuthorization(workers[i % 2]!.kysely, ISSUER, client, 'read:posts', '192.0.2.8', Date.now)),
    );
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(MAX_PENDING_DEVICE_CODES_PER_ADDRESS);
    const refusals = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as unknown] : []));
    expect(refusals).toHaveLength(10);
    for (const refusal of refusals) {
      expect(refusal).toBeInstanceOf(OAuthError);
      expect({ ...(refusal as OAuthError) }).toEqual({
        error: 'temporarily_unavailable',
        description: 'Too many device codes of this client requested from this address are waiting for their users; retry after Retry-After seconds.',
        status: 429,
        headers: { 'retry-after': expect.stringMatching(/^(599|600)$/) },
        name: 'OAuthError',
      });
    }
    const stored = await workers[1].kysely.selectFrom('deviceCodes').select(['addressKey', 'status']).where('clientRegistrationId', '=', client.id).execute();
    expect(stored).toEqual(Array<unknown>(MAX_PENDING_DEVICE_CODES_PER_ADDRESS).fill({ addressKey: '192.0.2.8', status: 'pending' }));
  });
});
