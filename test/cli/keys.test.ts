import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { auditSigningKey, writeCheckpoint } from '../../src/audit/checkpoints.js';
import { AuditLog } from '../../src/audit/audit-log.js';
import { configFrom } from '../../src/config/config.js';
import { decryptPrivateJwk, deriveEncryptionKey, KeyDecryptionError } from '../../src/oauth/keys/key-encryption.js';
import { KeyStore } from '../../src/oauth/keys/key-store.js';
import { sampleDecision, SILENT_LOGGER } from '../helpers/audit.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, runCli, type CliDatabase } from './cli-process.js';

const OLD_SECRET = 'the-secret-the-keys-were-encrypted-under-first';
const NEW_SECRET = 'the-secret-that-replaces-it-0123456789abcdef';
const AHEAD_MS = 15 * 60 * 1000;

describe.each(DATABASE_KINDS)('portcullis keys on %s', { timeout: CLI_TEST_TIMEOUT }, (kind) => {
  let t: CliDatabase;
  beforeEach(async () => {
    t = await openCliDatabase(kind);
  });
  afterEach(async () => {
    await t.close();
  });

  it('rotate prints the new ES256 and RS256 kids, published at once and signing 15 minutes later; list shows when each key signs and retires', async () => {
    // The server's key as it exists after its first start.
    const config = configFrom({});
    const before = await KeyStore.open(t.db, config);
    const oldKid = (await before.signingKey()).kid;
    const oldIdTokenKid = (await before.signingKey('RS256')).kid;

    const started = Date.now();
    const rotated = await runCli(['keys', 'rotate'], t.env);
    expect(rotated).toMatchObject({ code: 0, stderr: '' });
    const [, newKid, newIdTokenKid, activatesAt] =
      /^new signing key (\S+) \(ES256, access tokens\) and (\S+) \(RS256, ID tokens\), published now; every server signs with them from (\S+)\n$/.exec(rotated.stdout) ?? [];
    expect(newKid).toBeDefined();
    expect(newKid).not.toBe(oldKid);
    expect(newIdTokenKid).not.toBe(oldIdTokenKid);
    expect(Date.parse(activatesAt!)).toBeGreaterThanOrEqual(started + AHEAD_MS);
    expect(Date.parse(activatesAt!)).toBeLessThanOrEqual(Date.now() + AHEAD_MS);

    const listed = await runCli(['keys', 'list', '--json'], t.env);
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    const keys = JSON.parse(listed.stdout) as { kid: string; alg: string; created: string; activates: string; retired: string | null }[];
    const created = (kid: string) => keys.find((key) => key.kid === kid)!.created;
    const rotatedAt = created(newKid!);
    // The waiting keys first, then the signing ones; each pair by kid.
    const byKidDescending = (a: { kid: string }, b: { kid: string }) => (a.kid < b.kid ? 1 : -1);
    expect(keys).toEqual([
      ...[
        { kid: newKid!, alg: 'ES256', created: rotatedAt, activates: activatesAt!, retired: null },
        { kid: newIdTokenKid!, alg: 'RS256', created: rotatedAt, activates: activatesAt!, retired: null },
      ].sort(byKidDescending),
      ...[
        { kid: oldKid, alg: 'ES256', created: created(oldKid), activates: created(oldKid), retired: activatesAt! },
        { kid: oldIdTokenKid, alg: 'RS256', created: created(oldIdTokenKid), activates: created(oldIdTokenKid), retired: activatesAt! },
      ].sort(byKidDescending),
    ]);
    expect(created(newIdTokenKid!)).toBe(rotatedAt);
    // Only public facts: nothing of the private key, encrypted or not.
    expect(listed.stdout).not.toMatch(/private|"d"/i);

    let now = Date.now();
    const after = await KeyStore.open(t.db, config, { clock: () => now });
    expect((await after.signingKey()).kid).toBe(oldKid);
    expect((await after.publicJwks()).keys.map((k) => k.kid).sort()).toEqual([newKid, oldKid, newIdTokenKid, oldIdTokenKid].sort());
    now = Date.parse(activatesAt!);
    expect((await after.signingKey()).kid).toBe(newKid);
    expect((await after.signingKey('RS256')).kid).toBe(newIdTokenKid);

    const table = await runCli(['keys', 'list'], t.env);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^kid\s+alg\s+created\s+activates\s+retired$/);
    expect(lines.slice(1).map((line) => line.split(/\s+/))).toEqual(keys.map((key) => [key.kid, key.alg, key.created, key.activates, key.retired ?? '-']));

    const json = await runCli(['keys', 'rotate', '--json'], t.env);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(json.stdout)).toEqual({ kid: expect.any(String), idTokenKid: expect.any(String), activatesAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) });
  });

  /** Signing keys (one rotation: retired and waiting keys too) and the audit key, all under OLD_SECRET, and a checkpoint. */
  async function keysUnderOldSecret() {
    const old = configFrom({ KEY_ENCRYPTION_SECRET: OLD_SECRET });
    const store = await KeyStore.open(t.db, old);
    await store.rotate();
    const audit = new AuditLog(t.db, SILENT_LOGGER, { maxBatch: 50, flushMs: 5 });
    for (let i = 0; i < 3; i++) audit.record(sampleDecision(i));
    await audit.close();
    const auditKey = await auditSigningKey(t.db.kysely, OLD_SECRET);
    const checkpoint = await writeCheckpoint(t.db.kysely, auditKey);
    return { auditKey, checkpoint: checkpoint!, signing: (await store.signingKey()).kid };
  }

  async function storedKeys() {
    return {
      signing: await t.db.kysely.selectFrom('signingKeys').selectAll().orderBy('kid').execute(),
      audit: await t.db.kysely.selectFrom('auditKeys').selectAll().orderBy('kid').execute(),
    };
  }

  function decryptsUnder(secret: string, row: { kid: string; privateJwkEncrypted: string }): boolean {
    try {
      return typeof decryptPrivateJwk(row.privateJwkEncrypted, row.kid, deriveEncryptionKey(secret)).d === 'string';
    } catch (error) {
      if (error instanceof KeyDecryptionError) return false;
      throw error;
    }
  }

  it('rewrap re-encrypts every signing key and the audit key from PREVIOUS_KEY_ENCRYPTION_SECRET to KEY_ENCRYPTION_SECRET, keeping kids and public parts', async () => {
    const { auditKey, checkpoint, signing } = await keysUnderOldSecret();
    const before = await storedKeys();
    expect(before.signing).toHaveLength(4);

    const env = { ...t.env, KEY_ENCRYPTION_SECRET: NEW_SECRET, PREVIOUS_KEY_ENCRYPTION_SECRET: OLD_SECRET };
    expect(await runCli(['keys', 'rewrap'], env)).toEqual({
      code: 0,
      stdout: 're-encrypted 4 signing keys and 1 audit key under KEY_ENCRYPTION_SECRET\n',
      stderr: '',
    });

    const after = await storedKeys();
    const publicFacts = (rows: typeof before.signing) => rows.map(({ privateJwkEncrypted: _, ...row }) => row);
    expect(publicFacts(after.signing)).toEqual(publicFacts(before.signing));
    expect(after.audit.map(({ privateJwkEncrypted: _, ...row }) => row)).toEqual(before.audit.map(({ privateJwkEncrypted: _, ...row }) => row));
    for (const row of [...after.signing, ...after.audit]) {
      expect({ kid: row.kid, new: decryptsUnder(NEW_SECRET, row), old: decryptsUnder(OLD_SECRET, row) }).toEqual({ kid: row.kid, new: true, old: false });
    }
    // The same keys, now under the new secret alone: the same signer, the same audit key, the checkpoint still valid.
    const current = configFrom({ KEY_ENCRYPTION_SECRET: NEW_SECRET });
    expect((await (await KeyStore.open(t.db, current)).signingKey()).kid).toBe(signing);
    expect((await auditSigningKey(t.db.kysely, NEW_SECRET)).fingerprint).toBe(auditKey.fingerprint);
    const verified = await runCli(['audit', 'verify', `--key-fingerprint=${auditKey.fingerprint}`, '--json'], { ...t.env, KEY_ENCRYPTION_SECRET: NEW_SECRET });
    expect(verified.code).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, events: 3, checkpoints: 1, keyFingerprints: [auditKey.fingerprint] });
    expect(checkpoint.keyFingerprint).toBe(auditKey.fingerprint);

    // Run again: nothing left to do.
    expect(await runCli(['keys', 'rewrap'], env)).toEqual({ code: 0, stdout: 'nothing to re-encrypt: 5 keys already under KEY_ENCRYPTION_SECRET\n', stderr: '' });
    const json = await runCli(['keys', 'rewrap', '--json'], env);
    expect(JSON.parse(json.stdout)).toEqual({ signingKeys: 0, auditKeys: 0, alreadyCurrent: 5, unreadableAuditKeys: [] });
  });

  it('rewrap with a wrong PREVIOUS_KEY_ENCRYPTION_SECRET exits 1 naming the key, and changes nothing', async () => {
    await keysUnderOldSecret();
    const before = await storedKeys();
    const result = await runCli(['keys', 'rewrap'], {
      ...t.env,
      KEY_ENCRYPTION_SECRET: NEW_SECRET,
      PREVIOUS_KEY_ENCRYPTION_SECRET: 'not-the-secret-the-keys-are-under-at-all',
    });
    const kids = before.signing.map((row) => row.kid).sort();
    expect(result).toEqual({
      code: 1,
      stdout: '',
      stderr: `error: signing key ${kids.join(', ')} decrypts under neither PREVIOUS_KEY_ENCRYPTION_SECRET nor KEY_ENCRYPTION_SECRET; nothing was changed\n`,
    });
    expect(await storedKeys()).toEqual(before);
  });

  it('rewrap refuses, changing nothing, when the audit key decrypts under neither secret', async () => {
    // Signing keys already under the new secret; the audit key under a third one.
    await KeyStore.open(t.db, configFrom({ KEY_ENCRYPTION_SECRET: NEW_SECRET }));
    await auditSigningKey(t.db.kysely, 'a-third-secret-nobody-configured-0123456789');
    const before = await storedKeys();
    expect(await runCli(['keys', 'rewrap'], { ...t.env, KEY_ENCRYPTION_SECRET: NEW_SECRET, PREVIOUS_KEY_ENCRYPTION_SECRET: OLD_SECRET })).toEqual({
      code: 1,
      stdout: '',
      stderr: 'error: the audit key decrypts under neither PREVIOUS_KEY_ENCRYPTION_SECRET nor KEY_ENCRYPTION_SECRET; nothing was changed\n',
    });
    expect(await storedKeys()).toEqual(before);
  });

  it('rewrap counts keys made under the new secret as done, and leaves a planted audit key row alone', async () => {
    const { auditKey } = await keysUnderOldSecret();
    // A server already on the new secret rotated meanwhile: its keys are under it.
    await (await KeyStore.open(t.db, configFrom({ KEY_ENCRYPTION_SECRET: NEW_SECRET, PREVIOUS_KEY_ENCRYPTION_SECRET: OLD_SECRET }))).rotate();
    await t.db.kysely.insertInto('auditKeys').values({ kid: 'planted', publicJwk: '{}', privateJwkEncrypted: 'junk', createdAt: new Date().toISOString() }).execute();
    const result = await runCli(['keys', 'rewrap'], { ...t.env, KEY_ENCRYPTION_SECRET: NEW_SECRET, PREVIOUS_KEY_ENCRYPTION_SECRET: OLD_SECRET });
    expect(result).toEqual({
      code: 0,
      stdout:
        're-encrypted 4 signing keys and 1 audit key under KEY_ENCRYPTION_SECRET (2 keys already under it)\n' +
        'left 1 audit key row neither secret decrypts, which never signs: planted\n',
      stderr: '',
    });
    expect((await auditSigningKey(t.db.kysely, NEW_SECRET)).fingerprint).toBe(auditKey.fingerprint);
  });

  it('rewrap needs both secrets from the environment: without PREVIOUS_KEY_ENCRYPTION_SECRET, or on the development default, it exits 78', async () => {
    await keysUnderOldSecret();
    const before = await storedKeys();
    expect(await runCli(['keys', 'rewrap'], { ...t.env, KEY_ENCRYPTION_SECRET: NEW_SECRET })).toEqual({
      code: 78,
      stdout: '',
      stderr: 'Invalid configuration:\n  - PREVIOUS_KEY_ENCRYPTION_SECRET: keys rewrap needs the secret the keys are encrypted under now\n',
    });
    expect(await runCli(['keys', 'rewrap'], { ...t.env, PREVIOUS_KEY_ENCRYPTION_SECRET: OLD_SECRET })).toEqual({
      code: 78,
      stdout: '',
      stderr: 'Invalid configuration:\n  - KEY_ENCRYPTION_SECRET: is not set; keys rewrap re-encrypts under it and will not use the development default\n',
    });
    // A secret is never an argument (`ps` shows arguments to every user of the machine).
    const argument = await runCli(['keys', 'rewrap', '--old-secret', OLD_SECRET], { ...t.env, KEY_ENCRYPTION_SECRET: NEW_SECRET });
    expect(argument.code).toBe(2);
    expect(argument.stderr).toMatch(/^error: Unknown option '--old-secret'/);
    expect(await storedKeys()).toEqual(before);
  });
});
