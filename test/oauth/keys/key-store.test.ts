import { SignJWT, jwtVerify } from 'jose';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { KeyDecryptionError, decryptPrivateJwk, deriveEncryptionKey } from '../../../src/oauth/keys/key-encryption.js';
import { KeyStore } from '../../../src/oauth/keys/key-store.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { makeConfig } from '../fixtures.js';

const config = makeConfig();
/** Retired keys stay published for the longest token lifetime + the 60 s refresh interval + the skew. */
const RETENTION_MS = (3600 + 60 + config.tokens.clockSkew) * 1000;

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
    expect(await t.db.kysely.selectFrom('signingKeys').select('kid').execute()).toHaveLength(2);
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

  it('rotates: the new key signs, the old public key stays in the JWKS and keeps verifying', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const keys = await KeyStore.open(t.db, config, { clock: () => now });
    const old = await keys.signingKey();
    const oldToken = await new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: old.kid }).sign(old.privateKey);

    const newKid = await keys.rotate();
    expect(newKid).not.toBe(old.kid);
    expect((await keys.signingKey()).kid).toBe(newKid);
    expect(await publishedKids(keys, 'ES256')).toEqual([newKid, old.kid]);
    const oldKey = await keys.verificationKey(old.kid);
    expect(oldKey).not.toBeNull();
    await expect(jwtVerify(oldToken, oldKey!)).resolves.toBeDefined();
    const row = await t.db.kysely.selectFrom('signingKeys').select('retiredAt').where('kid', '=', old.kid).executeTakeFirstOrThrow();
    expect(row.retiredAt).toBe(new Date(now).toISOString());

    // Once every token the old key can have signed has expired, it is no longer published.
    now += RETENTION_MS - 1000;
    expect(await publishedKids(keys, 'ES256')).toEqual([newKid, old.kid]);
    now += 1000;
    expect(await publishedKids(keys, 'ES256')).toEqual([newKid]);
    expect(await keys.verificationKey(old.kid)).toBeNull();

    // The next rotation deletes it from the table.
    const third = await keys.rotate();
    const kids = (await t.db.kysely.selectFrom('signingKeys').select('kid').where('alg', '=', 'ES256').execute()).map((r) => r.kid).sort();
    expect(kids).toEqual([newKid, third].sort());
  });

  it('finds a key rotated in by another instance, reading the database at most once per 10 s for unknown kids', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const ours = await KeyStore.open(t.db, config, { clock: () => now });
    const theirs = await KeyStore.open(t.db, config, { clock: () => now });
    const rotatedKid = await theirs.rotate();

    const reads = vi.spyOn(t.db.kysely, 'selectFrom');
    // Just loaded: an unknown kid is rejected without a read.
    expect(await ours.verificationKey(rotatedKid)).toBeNull();
    expect(await ours.verificationKey('made-up')).toBeNull();
    expect(reads).not.toHaveBeenCalled();

    now += 10_000;
    expect(await ours.verificationKey('made-up')).toBeNull();
    expect(await ours.verificationKey('made-up-too')).toBeNull();
    expect(reads).toHaveBeenCalledTimes(1);
    // That one read also brought in the other instance's new key.
    expect(await ours.verificationKey(rotatedKid)).not.toBeNull();
    expect(reads).toHaveBeenCalledTimes(1);
  });

  it('switches to the key another instance rotated in within a minute', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const ours = await KeyStore.open(t.db, config, { clock: () => now });
    const theirs = await KeyStore.open(t.db, config, { clock: () => now });
    const before = (await ours.signingKey()).kid;
    const rotatedKid = await theirs.rotate();
    expect((await ours.signingKey()).kid).toBe(before);
    now += 60_000;
    expect((await ours.signingKey()).kid).toBe(rotatedKid);
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

  it('rotates the ID-token key with the access-token key, whether or not an ID token was signed', async () => {
    t = await createTestDatabase(kind);
    const keys = await KeyStore.open(t.db, config);
    const [oldRs] = await publishedKids(keys, 'RS256');
    const oldEs = (await keys.signingKey()).kid;
    const newEs = await keys.rotate();
    const newRs = (await keys.signingKey('RS256')).kid;
    expect(newEs).not.toBe(oldEs);
    expect(newRs).not.toBe(oldRs);
    expect((await keys.signingKey()).kid).toBe(newEs);
    expect((await keys.publicJwks()).keys.map((key) => key.kid).sort()).toEqual([oldEs, oldRs, newEs, newRs].sort());
  });
});
