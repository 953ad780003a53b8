import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { configFrom } from '../../src/config/config.js';
import { KeyStore } from '../../src/oauth/keys/key-store.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, runCli, type CliDatabase } from './cli-process.js';

describe.each(DATABASE_KINDS)('portcullis keys on %s', { timeout: CLI_TEST_TIMEOUT }, (kind) => {
  let t: CliDatabase;
  beforeEach(async () => {
    t = await openCliDatabase(kind);
  });
  afterEach(async () => {
    await t.close();
  });

  it('rotate prints the new ES256 and RS256 kids, which sign; list shows the old keys retired and still published', async () => {
    // The server's key as it exists after its first start.
    const config = configFrom({});
    const before = await KeyStore.open(t.db, config);
    const oldKid = (await before.signingKey()).kid;
    const oldIdTokenKid = (await before.signingKey('RS256')).kid;

    const rotated = await runCli(['keys', 'rotate'], t.env);
    expect(rotated.code).toBe(0);
    const [, newKid, newIdTokenKid] = /^new signing key (\S+) \(ES256, access tokens\) and (\S+) \(RS256, ID tokens\); servers switch to them within a minute\n$/.exec(rotated.stdout) ?? [];
    expect(newKid).toBeDefined();
    expect(newKid).not.toBe(oldKid);
    expect(newIdTokenKid).not.toBe(oldIdTokenKid);

    const listed = await runCli(['keys', 'list', '--json'], t.env);
    expect(listed.code).toBe(0);
    const keys = JSON.parse(listed.stdout) as { kid: string; alg: string; created: string; retired: string | null }[];
    // Newest first; the two keys of one rotation share their time (the database's collation orders their kids).
    const byKid = (a: { kid: string }, b: { kid: string }) => (a.kid < b.kid ? -1 : a.kid > b.kid ? 1 : 0);
    const created = (kid: string) => keys.find((key) => key.kid === kid)?.created;
    const rotatedAt = created(newKid!)!;
    expect(created(newIdTokenKid!)).toBe(rotatedAt);
    const expected = [
      { kid: newKid!, alg: 'ES256', retired: null },
      { kid: newIdTokenKid!, alg: 'RS256', retired: null },
      { kid: oldKid, alg: 'ES256', retired: rotatedAt },
      { kid: oldIdTokenKid, alg: 'RS256', retired: rotatedAt },
    ].map((key) => ({ ...key, created: created(key.kid)! }));
    expect([...keys].sort(byKid)).toEqual(expected.sort(byKid));
    expect(keys.map((key) => key.created)).toEqual(keys.map((key) => key.created).sort().reverse());
    // Only public facts: nothing of the private key, encrypted or not.
    expect(listed.stdout).not.toMatch(/private|"d"/i);

    const after = await KeyStore.open(t.db, config);
    expect((await after.signingKey()).kid).toBe(newKid);
    expect((await after.signingKey('RS256')).kid).toBe(newIdTokenKid);
    expect((await after.publicJwks()).keys.map((k) => k.kid).sort()).toEqual([newKid, oldKid, newIdTokenKid, oldIdTokenKid].sort());

    const table = await runCli(['keys', 'list'], t.env);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^kid\s+alg\s+created\s+retired$/);
    expect(lines.slice(1).map((line) => line.split(/\s+/))).toEqual(keys.map((key) => [key.kid, key.alg, key.created, key.retired ?? '-']));
  });
});
