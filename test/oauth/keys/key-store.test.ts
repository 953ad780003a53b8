import { SignJWT, jwtVerify } from 'jose';
import { afterEach, describe, expect, it, vi } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { KeyDecryptionError, decryptPrivateJwk, deriveEncryptionKey } from '../../../src/oauth/keys/key-encryption.js';
import { JWKS_MAX_AGE_SECONDS, KEY_REFRESH_MS, KeyStore, PUBLISH_AHEAD_SECONDS, type KeyRotation } from '../../../src/oauth/keys/key-store.js';
import { openDb, type Db } from '../../../src/storage/dialect.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { makeConfig } from '../fixtures.js';

const config = makeConfig();
/** Retired keys stay published for the longest token lifetime + the 60 s refresh interval + the skew. */
const RETENTION_MS = (3600 + 60 + config.tokens.clockSkew) * 1000;
/** New keys are published this long before they sign. */
const AHEAD_MS = 15 * 60 * 1000;
const DAY_MS = 86_400_000;
const OLD_SECRET = 'the-secret-the-keys-were-encrypted-under-first';
const NEW_SECRET = 'the-secret-that-replaces-it-0123456789abcdef';

describe.each(DATABASE_KINDS)('key store on %s', (kind) => {
  let t: TestDatabase;
  afterEach(async () => {
    vi.restoreAllMocks();
    await t.drop();
  });

  /** The published kids of one algorithm, in the JWKS's order. */
  async function publishedKids(keys: KeyStore, alg: 'ES256' | 'RS256'): Promise<string[]> {
    return (await keys.publicJwks()).keys.filter((key) => key.alg === alg).map((key) => key.kid);
  }

  it('creates one ES256 and one RS256 key on first open and publishes only their public members', async () => {
    t = await createTestDatabase(kind);
    const keys = await KeyStore.open(t.db, config);
    const signer = await keys.signingKey();
    const idSigner = await keys.signingKey('RS256');
    const byAlg = (a: { alg: string }, b: { alg: string }) => a.alg.localeCompare(b.alg);
    expect((await keys.publicJwks()).keys.sort(byAlg)).toEqual([
      { kty: 'EC', crv: 'P-256', x: expect.any(String), y: expect.any(String), kid: signer.kid, alg: 'ES256', use: 'sig' },
      { kty: 'RSA', n: expect.stringMatching(/^[A-Za-z0-9_-]{342}$/), e: 'AQAB', kid: idSigner.kid, alg: 'RS256', use: 'sig' },
    ]);
    const again = await KeyStore.open(t.db, config);
    expect((await again.signingKey()).kid).toBe(signer.kid);
    expect((await again.signingKey('RS256')).kid).toBe(idSigner.kid);
    // Both of the first generation, signing from the moment they were made.
    const rows = await t.db.kysely.selectFrom('signingKeys').select(['kid', 'generation', 'createdAt', 'activatesAt', 'retiredAt']).orderBy('kid').execute();
    expect(rows).toEqual(
      [signer.kid, idSigner.kid].sort().map((kid) => ({ kid, generation: 1, createdAt: expect.any(String), activatesAt: rows.find((row) => row.kid === kid)!.createdAt, retiredAt: null })),
    );
  });

  it('adds the RS256 key to a database that has only an ES256 key (made before both were created together)', async () => {
    t = await createTestDatabase(kind);
    const first = await KeyStore.open(t.db, config);
    const es = (await first.signingKey()).kid;
    await t.db.kysely.deleteFrom('signingKeys').where('alg', '=', 'RS256').execute();
    const keys = await KeyStore.open(t.db, config);
    expect(await publishedKids(keys, 'ES256')).toEqual([es]);
    expect(await publishedKids(keys, 'RS256')).toEqual([(await keys.signingKey('RS256')).kid]);
  });

  it('stores the private key encrypted: no "d" member is readable from the row', async () => {
    t = await createTestDatabase(kind);
    const keys = await KeyStore.open(t.db, config);
    const { kid } = await keys.signingKey();
    const row = await t.db.kysely.selectFrom('signingKeys').selectAll().where('kid', '=', kid).executeTakeFirstOrThrow();
    expect(() => JSON.parse(row.privateJwkEncrypted)).toThrow();
    expect(JSON.parse(row.publicJwk)).not.toHaveProperty('d');
    const privateJwk = decryptPrivateJwk(row.privateJwkEncrypted, kid, deriveEncryptionKey(config.keyEncryptionSecret));
    expect(privateJwk.d).toEqual(expect.any(String));
    expect(row.privateJwkEncrypted).not.toContain(privateJwk.d as string);
    expect(row.privateJwkEncrypted).not.toContain('"d"');
  });

  it('cannot decrypt the signing key with a different KEY_ENCRYPTION_SECRET', async () => {
    t = await createTestDatabase(kind);
    await KeyStore.open(t.db, config);
    const other = makeConfig({ KEY_ENCRYPTION_SECRET: 'another-secret-that-is-at-least-32-characters' });
    await expect(KeyStore.open(t.db, other)).rejects.toBeInstanceOf(KeyDecryptionError);
  });

  it('signs with keys still encrypted under PREVIOUS_KEY_ENCRYPTION_SECRET, and encrypts the keys it makes under the new secret', async () => {
    t = await createTestDatabase(kind);
    const before = await KeyStore.open(t.db, makeConfig({ KEY_ENCRYPTION_SECRET: OLD_SECRET }));
    const kid = (await before.signingKey()).kid;
    const replacing = makeConfig({ KEY_ENCRYPTION_SECRET: NEW_SECRET, PREVIOUS_KEY_ENCRYPTION_SECRET: OLD_SECRET });
    await expect(KeyStore.open(t.db, makeConfig({ KEY_ENCRYPTION_SECRET: NEW_SECRET }))).rejects.toBeInstanceOf(KeyDecryptionError);

    let now = Date.now();
    const keys = await KeyStore.open(t.db, replacing, { clock: () => now });
    const signer = await keys.signingKey();
    expect(signer.kid).toBe(kid);
    const token = await new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid }).sign(signer.privateKey);
    await expect(jwtVerify(token, (await before.verificationKey(kid))!)).resolves.toBeDefined();

    const rotation = await keys.rotate();
    const row = await t.db.kysely.selectFrom('signingKeys').select('privateJwkEncrypted').where('kid', '=', rotation.kid).executeTakeFirstOrThrow();
    expect(decryptPrivateJwk(row.privateJwkEncrypted, rotation.kid, deriveEncryptionKey(NEW_SECRET)).d).toEqual(expect.any(String));
    expect(() => decryptPrivateJwk(row.privateJwkEncrypted, rotation.kid, deriveEncryptionKey(OLD_SECRET))).toThrow(KeyDecryptionError);
    now += AHEAD_MS;
    expect((await keys.signingKey()).kid).toBe(rotation.kid);
  });

  it('rotates: the new keys are published at once and sign from 15 minutes on; the old ones stay published for the longest token lifetime after', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const keys = await KeyStore.open(t.db, config, { clock: () => now });
    const old = await keys.signingKey();
    const oldIdToken = await keys.signingKey('RS256');
    const oldToken = await new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: old.kid }).sign(old.privateKey);

    const rotation = await keys.rotate();
    const activatesAt = new Date(now + AHEAD_MS).toISOString();
    expect(rotation).toEqual({ kid: expect.any(String), idTokenKid: expect.any(String), activatesAt });
    expect(rotation.kid).not.toBe(old.kid);
    // Published before it signs: a resource server's cached JWKS and every process have it first.
    expect(await publishedKids(keys, 'ES256')).toEqual([rotation.kid, old.kid]);
    expect(await publishedKids(keys, 'RS256')).toEqual([rotation.idTokenKid, oldIdToken.kid]);
    expect(await keys.verificationKey(rotation.kid)).not.toBeNull();
    expect((await keys.signingKey()).kid).toBe(old.kid);
    const rows = await t.db.kysely.selectFrom('signingKeys').select(['kid', 'generation', 'activatesAt', 'retiredAt']).orderBy('kid').execute();
    expect(rows).toEqual(
      [
        { kid: old.kid, generation: 1, activatesAt: expect.any(String), retiredAt: activatesAt },
        { kid: oldIdToken.kid, generation: 1, activatesAt: expect.any(String), retiredAt: activatesAt },
        { kid: rotation.kid, generation: 2, activatesAt, retiredAt: null },
        { kid: rotation.idTokenKid, generation: 2, activatesAt, retiredAt: null },
      ].sort((a, b) => (a.kid < b.kid ? -1 : 1)),
    );

    now += AHEAD_MS - 1;
    expect((await keys.signingKey()).kid).toBe(old.kid);
    expect((await keys.signingKey('RS256')).kid).toBe(oldIdToken.kid);
    now += 1;
    expect((await keys.signingKey()).kid).toBe(rotation.kid);
    expect((await keys.signingKey('RS256')).kid).toBe(rotation.idTokenKid);
    await expect(jwtVerify(oldToken, (await keys.verificationKey(old.kid))!)).resolves.toBeDefined();

    // Once every token the old key can have signed has expired, it is no longer published.
    now += RETENTION_MS - 1000;
    expect(await publishedKids(keys, 'ES256')).toEqual([rotation.kid, old.kid]);
    now += 1000;
    expect(await publishedKids(keys, 'ES256')).toEqual([rotation.kid]);
    expect(await keys.verificationKey(old.kid)).toBeNull();

    // The next rotation deletes it from the table.
    const third = await keys.rotate();
    const kids = (await t.db.kysely.selectFrom('signingKeys').select('kid').where('alg', '=', 'ES256').execute()).map((r) => r.kid).sort();
    expect(kids).toEqual([rotation.kid, third.kid].sort());
  });

  it('publishes the JWKS for a shorter time than a new key waits and an old key stays', () => {
    expect(PUBLISH_AHEAD_SECONDS).toBe(AHEAD_MS / 1000);
    // A client's copy may be JWKS_MAX_AGE_SECONDS old, another process's keys KEY_REFRESH_MS, and clocks
    // may differ by the largest TOKEN_CLOCK_SKEW (300 s): all of it within the time a new key waits.
    expect(JWKS_MAX_AGE_SECONDS + KEY_REFRESH_MS / 1000 + 300).toBeLessThan(PUBLISH_AHEAD_SECONDS);
    expect(JWKS_MAX_AGE_SECONDS * 1000).toBeLessThan(RETENTION_MS);
  });

  it('finds a key rotated in by another instance, reading the database at most once per 10 s for unknown kids', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const ours = await KeyStore.open(t.db, config, { clock: () => now });
    const theirs = await KeyStore.open(t.db, config, { clock: () => now });
    const rotated = await theirs.rotate();

    const reads = vi.spyOn(t.db.kysely, 'selectFrom');
    // Just loaded: an unknown kid is rejected without a read.
    expect(await ours.verificationKey(rotated.kid)).toBeNull();
    expect(await ours.verificationKey('made-up')).toBeNull();
    expect(reads).not.toHaveBeenCalled();

    now += 10_000;
    expect(await ours.verificationKey('made-up')).toBeNull();
    expect(await ours.verificationKey('made-up-too')).toBeNull();
    expect(reads).toHaveBeenCalledTimes(1);
    // That one read also brought in the other instance's new key.
    expect(await ours.verificationKey(rotated.kid)).not.toBeNull();
    expect(reads).toHaveBeenCalledTimes(1);
  });

  it('holds the keys another instance rotated in within a minute, long before they sign, and switches at the same moment', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const ours = await KeyStore.open(t.db, config, { clock: () => now });
    const theirs = await KeyStore.open(t.db, config, { clock: () => now });
    const before = (await ours.signingKey()).kid;
    const rotated = await theirs.rotate();
    now += KEY_REFRESH_MS;
    expect((await ours.publicJwks()).keys.map((key) => key.kid)).toEqual(expect.arrayContaining([rotated.kid, rotated.idTokenKid]));
    expect((await ours.signingKey()).kid).toBe(before);
    expect((await theirs.signingKey()).kid).toBe(before);
    now = Date.parse(rotated.activatesAt);
    expect((await ours.signingKey()).kid).toBe(rotated.kid);
    expect((await theirs.signingKey()).kid).toBe(rotated.kid);
  });

  it('rotates on the SIGNING_KEY_ROTATION_DAYS schedule: the next keys are published 15 minutes before the current ones reach that age', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const start = now;
    const keys = await KeyStore.open(t.db, makeConfig({ SIGNING_KEY_ROTATION_DAYS: '1' }), { clock: () => now });
    const first = (await keys.signingKey()).kid;

    now = start + DAY_MS - AHEAD_MS - 1;
    expect(await keys.rotateIfDue()).toBeNull();
    now += 1;
    const second = await keys.rotateIfDue();
    expect(second).toEqual({ kid: expect.any(String), idTokenKid: expect.any(String), activatesAt: new Date(start + DAY_MS).toISOString() });
    // New keys are waiting: nothing more to do until they sign.
    now += AHEAD_MS - 1;
    expect(await keys.rotateIfDue()).toBeNull();
    expect((await keys.signingKey()).kid).toBe(first);
    expect(await publishedKids(keys, 'ES256')).toEqual([second!.kid, first]);
    now += 1;
    expect((await keys.signingKey()).kid).toBe(second!.kid);
    expect(await keys.rotateIfDue()).toBeNull();

    now = start + 2 * DAY_MS - AHEAD_MS;
    const third = await keys.rotateIfDue();
    expect(third?.activatesAt).toBe(new Date(start + 2 * DAY_MS).toISOString());
    const generations = await t.db.kysely.selectFrom('signingKeys').select(['alg', 'generation']).orderBy('generation').orderBy('alg').execute();
    // The first keys retired a day ago, longer than any of their tokens lives: that rotation deleted them.
    expect(generations).toEqual([2, 3].flatMap((generation) => [{ alg: 'ES256', generation }, { alg: 'RS256', generation }]));
  });

  it('after a stop past the rotation date, rotates at once and signs with the old keys until the new ones activate', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const keys = await KeyStore.open(t.db, config, { clock: () => now });
    const first = (await keys.signingKey()).kid;
    // The default schedule is 90 days; the server was off for 200.
    now += 200 * DAY_MS;
    const rotation = await keys.rotateIfDue();
    expect(rotation?.activatesAt).toBe(new Date(now + AHEAD_MS).toISOString());
    expect((await keys.signingKey()).kid).toBe(first);
  });

  it('never rotates on its own with SIGNING_KEY_ROTATION_DAYS=0, and still re-reads the keys', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const keys = await KeyStore.open(t.db, makeConfig({ SIGNING_KEY_ROTATION_DAYS: '0' }), { clock: () => now });
    const other = await KeyStore.open(t.db, config, { clock: () => now });
    const first = (await keys.signingKey()).kid;
    now += 400 * DAY_MS;
    expect(await keys.rotateIfDue()).toBeNull();
    expect((await keys.signingKey()).kid).toBe(first);
    expect(await t.db.kysely.selectFrom('signingKeys').select('kid').execute()).toHaveLength(2);
    const rotated = await other.rotate();
    expect(await keys.rotateIfDue()).toBeNull();
    expect(await keys.verificationKey(rotated.kid)).not.toBeNull();
  });

  it('rotates once when several processes find the rotation due at the same moment, and they agree on the signer', async () => {
    t = await createTestDatabase(kind);
    // On PostgreSQL separate pools, as separate server processes have: their transactions overlap, and the
    // unique generation refuses the later ones. SQLite has one writer at a time (BEGIN IMMEDIATE): one
    // connection shows the rotation's check repeated in its transaction (two connections of one thread
    // would wait on each other's lock inside one event loop).
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-keys-'));
    const connections: Db[] = [];
    try {
      for (let i = 0; i < 3; i++) connections.push(kind === 'postgres' ? await openDb({ databaseUrl: t.url, dataDir }) : t.db);
      let now = Date.now();
      const daily = makeConfig({ SIGNING_KEY_ROTATION_DAYS: '1' });
      const stores: KeyStore[] = [];
      for (const db of connections) stores.push(await KeyStore.open(db, daily, { clock: () => now }));
      const first = (await stores[0]!.signingKey()).kid;
      expect(await Promise.all(stores.map(async (store) => (await store.signingKey()).kid))).toEqual([first, first, first]);

      now += DAY_MS;
      let rotations: (KeyRotation | null)[];
      if (kind === 'postgres') {
        // Every process reads the keys before any writes: a lock held elsewhere stops them all at their first write.
        const blocker = new pg.Client({ connectionString: t.url! });
        await blocker.connect();
        await blocker.query('begin');
        await blocker.query('lock table signing_keys in exclusive mode');
        const running = Promise.all(stores.map((store) => store.rotateIfDue()));
        const waiting = async () =>
          (await blocker.query<{ n: number }>("select count(*)::int as n from pg_locks where not granted and relation = 'signing_keys'::regclass")).rows[0]!.n;
        while ((await waiting()) < stores.length) await new Promise((resolve) => setTimeout(resolve, 20));
        await blocker.query('commit');
        await blocker.end();
        rotations = await running;
      } else {
        rotations = await Promise.all(stores.map((store) => store.rotateIfDue()));
      }
      const made = rotations.filter((rotation) => rotation !== null);
      expect(made).toHaveLength(1);
      const rows = await connections[0]!.kysely.selectFrom('signingKeys').select(['alg', 'generation']).orderBy('generation').orderBy('alg').execute();
      expect(rows).toEqual([
        { alg: 'ES256', generation: 1 },
        { alg: 'RS256', generation: 1 },
        { alg: 'ES256', generation: 2 },
        { alg: 'RS256', generation: 2 },
      ]);
      now = Date.parse(made[0]!.activatesAt);
      expect(await Promise.all(stores.map(async (store) => (await store.signingKey()).kid))).toEqual([made[0]!.kid, made[0]!.kid, made[0]!.kid]);
    } finally {
      if (kind === 'postgres') for (const db of connections) await db.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('refuses a second key of the same algorithm and generation (what stops two rotations made at once)', async () => {
    t = await createTestDatabase(kind);
    await KeyStore.open(t.db, config);
    const [row] = await t.db.kysely.selectFrom('signingKeys').selectAll().where('alg', '=', 'ES256').execute();
    await expect(t.db.kysely.insertInto('signingKeys').values({ ...row!, kid: 'another-kid' }).execute()).rejects.toThrow(/unique/i);
    await t.db.kysely.insertInto('signingKeys').values({ ...row!, kid: 'another-kid', generation: 2 }).execute();
  });

  it('publishes the RS256 ID-token key before any ID token is signed, and never verifies an ES256 token with it', async () => {
    t = await createTestDatabase(kind);
    const keys = await KeyStore.open(t.db, config);
    const es = await keys.signingKey();
    const [rsKid] = await publishedKids(keys, 'RS256');
    const rs = await keys.signingKey('RS256');
    expect(rs).toMatchObject({ kid: rsKid, alg: 'RS256' });
    // A kid is only good for the algorithm its key was made for (no RSA key behind an ES256 header).
    expect(await keys.verificationKey(rs.kid, 'ES256')).toBeNull();
    expect(await keys.verificationKey(es.kid, 'RS256')).toBeNull();
    const jwt = await new SignJWT({}).setProtectedHeader({ alg: 'RS256', kid: rs.kid }).sign(rs.privateKey);
    await expect(jwtVerify(jwt, (await keys.verificationKey(rs.kid, 'RS256'))!)).resolves.toBeTruthy();
    // Another instance finds the same key rather than making its own.
    expect((await (await KeyStore.open(t.db, config)).signingKey('RS256')).kid).toBe(rs.kid);
  });
});
