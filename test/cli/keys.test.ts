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

  it('rotate prints the new kid, which signs; list shows both keys, the old one retired and still published', async () => {
    // The server's key as it exists after its first start.
    const config = configFrom({});
    const before = await KeyStore.open(t.db, config);
    const oldKid = (await before.signingKey()).kid;

    const rotated = await runCli(['keys', 'rotate'], t.env);
    expect(rotated.code).toBe(0);
    const newKid = /^new signing key (\S+);/.exec(rotated.stdout)?.[1];
    expect(newKid).toBeDefined();
    expect(newKid).not.toBe(oldKid);

    const listed = await runCli(['keys', 'list', '--json'], t.env);
    expect(listed.code).toBe(0);
    const keys = JSON.parse(listed.stdout);
    expect(keys).toEqual([
      { kid: newKid, alg: 'ES256', created: expect.any(String), retired: null },
      { kid: oldKid, alg: 'ES256', created: expect.any(String), retired: keys[0].created },
    ]);
    // Only public facts: nothing of the private key, encrypted or not.
    expect(listed.stdout).not.toMatch(/private|"d"/i);

    const after = await KeyStore.open(t.db, config);
    expect((await after.signingKey()).kid).toBe(newKid);
    expect((await after.publicJwks()).keys.map((k) => k.kid).sort()).toEqual([newKid, oldKid].sort());

    const table = await runCli(['keys', 'list'], t.env);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^kid\s+alg\s+created\s+retired$/);
    expect(lines[1]).toMatch(new RegExp(`^${newKid}\\s+ES256\\s+\\S+\\s+-$`));
    expect(lines[2]).toMatch(new RegExp(`^${oldKid}\\s+ES256\\s+\\S+\\s+${keys[0].created.replace(/\./g, '\\.')}$`));
  });
});
