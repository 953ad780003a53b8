import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEVICE_CODE, MAX_PENDING_DEVICE_CODES, startDeviceAuthorization } from '../../../src/oauth/device/device-authorization.js';
import { lockPendingDeviceCodes } from '../../../src/storage/device-codes.js';
import { openDb, type Db } from '../../../src/storage/dialect.js';
import { migrateToLatest } from '../../../src/storage/migrate.js';
import { POSTGRES_BINARIES, startPrivatePostgres, type PrivatePostgres } from '../../helpers/private-postgres.js';
import { createClient, insertWaitingDeviceCodes, ISSUER } from '../fixtures.js';

// A client's waiting device codes are bounded exactly only if the requests that count far from the bound
// without waiting for each other cannot, all in flight at once, carry the count past it. No more of them can
// be in flight than PostgreSQL has connections, so the margin at which requests start to take turns is at
// least max_connections. A cluster of the test's own, set to more connections than the margin's 1,000.

const CONNECTIONS = 1_500;
/** A client this many codes from its bound: far from it by the fixed margin, near it by the connections. */
const LEFT = 1_200;
/** The advisory lock's first key for a registration's waiting codes ("devc"). */
const CLIENT_LOCK = 0x64657663;

const describeCluster = POSTGRES_BINARIES === null ? describe.skip : describe;

describeCluster(`device codes on a PostgreSQL with ${CONNECTIONS} connections`, () => {
  let postgres: PrivatePostgres;
  let db: Db;

  beforeAll(async () => {
    postgres = await startPrivatePostgres({ maxConnections: CONNECTIONS });
    db = await openDb({ databaseUrl: postgres.url, dataDir: '/nonexistent' });
    await migrateToLatest(db);
  }, 60_000);
  afterAll(async () => {
    await db?.close();
    await postgres?.destroy();
  });

  it("reports the cluster's connection limit with the registration's lock", async () => {
    const { client } = await createClient(db, { type: 'public', secretHash: null, grantTypes: [DEVICE_CODE], scopes: ['read:posts'], role: null });
    const shared = await db.kysely.transaction().execute((trx) => lockPendingDeviceCodes(trx, client.id, 'shared'));
    const exclusive = await db.kysely.transaction().execute((trx) => lockPendingDeviceCodes(trx, client.id, 'exclusive'));
    expect({ shared, exclusive }).toEqual({ shared: CONNECTIONS, exclusive: CONNECTIONS });
  });

  it(`takes turns for the client's lock when it is within ${CONNECTIONS} codes of its bound, not only within 1,000`, async () => {
    const { client } = await createClient(db, { type: 'public', secretHash: null, grantTypes: [DEVICE_CODE], scopes: ['read:posts'], role: null });
    const expiresAt = Date.now() + 600_000;
    await insertWaitingDeviceCodes(
      db,
      client,
      Array.from({ length: MAX_PENDING_DEVICE_CODES - LEFT }, (_, i) => ({ key: `held-${client.id}-${i}`, userCode: `M${i.toString().padStart(7, '0')}`, expiresAt })),
    );

    // Another request far from the bound holds the lock shared; near the bound, this one must wait for it.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let held!: () => void;
    const taken = new Promise<void>((resolve) => (held = resolve));
    const holder = db.kysely.transaction().execute(async (trx) => {
      await lockPendingDeviceCodes(trx, client.id, 'shared');
      held();
      await released;
    });
    await taken;
    let settled = false;
    const started = startDeviceAuthorization(db.kysely, ISSUER, client, 'read:posts', '192.0.2.90', Date.now).finally(() => (settled = true));
    const waiting = async () =>
      Number(
        (await sql<{ n: string }>`select count(*) as n from pg_locks where locktype = 'advisory' and not granted and classid = ${CLIENT_LOCK}`.execute(db.kysely)).rows[0]!
          .n,
      );
    for (let i = 0; i < 200 && (await waiting()) === 0 && !settled; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    const observed = { waiting: await waiting(), settled };
    release();
    await holder;
    expect(observed).toEqual({ waiting: 1, settled: false });
    expect((await started).expires_in).toBe(600);
  });
});
