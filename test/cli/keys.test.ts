import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { configFrom } from '../../src/config/config.js';
import { KeyStore } from '../../src/oauth/keys/key-store.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, runCli, type CliDatabase } from './cli-process.js';

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
});
