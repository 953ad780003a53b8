import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditLog } from '../../src/audit/audit-log.js';
import { liftAppendOnly, sampleDecision, SILENT_LOGGER } from '../helpers/audit.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, runCli, startCli, waitFor, type CliDatabase } from './cli-process.js';

describe.each(DATABASE_KINDS)('portcullis audit on %s', { timeout: CLI_TEST_TIMEOUT }, (kind) => {
  let t: CliDatabase;
  beforeEach(async () => {
    t = await openCliDatabase(kind);
  });
  afterEach(async () => {
    await t.close();
  });

  async function record(from: number, count: number): Promise<void> {
    const log = new AuditLog(t.db, SILENT_LOGGER);
    for (let i = from; i < from + count; i++) log.record(sampleDecision(i, { subject: 'user-1', reason: i % 2 === 0 ? 'granted' : 'scope' }));
    await log.close();
  }

  const events = () => t.db.kysely.selectFrom('auditEvents').selectAll().orderBy('seq').execute();

  it('never makes a second audit key: a command run with another KEY_ENCRYPTION_SECRET stops with exit 78', async () => {
    await record(0, 3);
    expect((await runCli(['audit', 'checkpoint'], t.env)).code).toBe(0);
    const keys = () => t.db.kysely.selectFrom('auditKeys').select('kid').execute();
    const before = await keys();
    expect(before).toHaveLength(1);
    await record(3, 2);
    const wrong = await runCli(['audit', 'checkpoint'], { ...t.env, KEY_ENCRYPTION_SECRET: 'another-secret-that-opens-nothing-0123456789' });
    expect(wrong).toEqual({ code: 78, stdout: '', stderr: 'error: The audit key cannot be decrypted: is KEY_ENCRYPTION_SECRET the one it was stored with? (To change it, set the old one in PREVIOUS_KEY_ENCRYPTION_SECRET and run "keys rewrap"; see the README.)\n' });
    expect(await keys()).toEqual(before);
    expect(await t.db.kysely.selectFrom('auditCheckpoints').select('number').execute()).toHaveLength(1);
  });

  it('verify reports ok on an intact chain, then exit 1 naming the first changed event', async () => {
    await record(0, 6);
    expect(await runCli(['audit', 'verify'], t.env)).toEqual({ code: 0, stdout: 'ok: 6 events, 0 checkpoints; none under a checkpoint yet\n', stderr: '' });

    // Only someone who can change the schema can rewrite history: lift the append-only triggers first.
    await liftAppendOnly(t.db.kysely, kind);
    const rows = await events();
    const target = rows[3]!;
    await t.db.kysely.updateTable('auditEvents').set({ decision: 'allow', reason: 'granted' }).where('seq', '=', target.seq).execute();

    const broken = await runCli(['audit', 'verify'], t.env);
    expect(broken).toEqual({
      code: 1,
      stdout: `broken: seq ${target.seq}, id ${target.id}, problem hash: its fields no longer produce its hash (the event was changed)\n`,
      stderr: '',
    });
    const json = await runCli(['audit', 'verify', '--json'], t.env);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toEqual({
      ok: false,
      events: 4,
      checkpoints: 0,
      uncovered: 3,
      keyFingerprints: [],
      archived: null,
      brokenAt: { seq: target.seq, id: target.id, problem: 'hash' },
      detail: 'its fields no longer produce its hash (the event was changed)',
    });

    // Removing an event breaks the link of the one after it.
    await t.db.kysely.deleteFrom('auditEvents').where('seq', '<=', target.seq).where('seq', '>=', rows[1]!.seq).execute();
    const removed = await runCli(['audit', 'verify'], t.env);
    expect(removed.code).toBe(1);
    expect(removed.stdout).toContain(`broken: seq ${rows[4]!.seq}, id ${rows[4]!.id}, problem link:`);
  });

  it('checkpoint prints a signed checkpoint; verify holds the chain to it and to the key fingerprint; archive keeps it verifiable', async () => {
    await record(0, 120);
    const printed = await runCli(['audit', 'checkpoint'], t.env);
    expect(printed.stderr).toBe('');
    expect(printed.code).toBe(0);
    const checkpoint = JSON.parse(printed.stdout) as { number: number; eventCount: number; keyFingerprint: string; jws: string };
    expect(checkpoint).toMatchObject({ number: 1, eventCount: 120, keyFingerprint: expect.stringMatching(/^[\w-]{43}$/) });
    const file = path.join(os.tmpdir(), `portcullis-checkpoint-${process.pid}-${kind}.json`);
    fs.writeFileSync(file, printed.stdout);
    try {
      const pinned = ['audit', 'verify', '--checkpoint', file, '--key-fingerprint', checkpoint.keyFingerprint];
      expect(await runCli(pinned, t.env)).toEqual({
        code: 0,
        stdout: `ok: 120 events, 1 checkpoint signed by ${checkpoint.keyFingerprint}; 0 after the newest checkpoint\n`,
        stderr: '',
      });
      const otherKey = await runCli(['audit', 'verify', '--key-fingerprint', 'A'.repeat(43)], t.env);
      expect(otherKey.code).toBe(1);
      expect(otherKey.stdout).toBe(`broken: problem unexpected-key: checkpoint 1 is signed by key ${checkpoint.keyFingerprint}, not ${'A'.repeat(43)}\n`);

      // Archive what is older than now: every event the checkpoint covers.
      const out = path.join(os.tmpdir(), `portcullis-archive-${process.pid}-${kind}.jsonl`);
      try {
        const archived = await runCli(['audit', 'archive', '--before', new Date(Date.now() + 1000).toISOString(), '--out', out], t.env);
        expect(archived.stderr).toBe('');
        expect(archived.stdout).toMatch(/^archived 120 events up to seq \d+ to .* \(vouched for by checkpoint 1\)\n$/);
        expect(fs.readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(122);
      } finally {
        fs.rmSync(out, { force: true });
      }
      await record(120, 5);
      expect((await runCli(pinned, t.env)).stdout).toMatch(
        new RegExp(`^ok: 5 events, 1 checkpoint signed by ${checkpoint.keyFingerprint}; 5 after the newest checkpoint; 120 earlier events archived \\(up to seq \\d+, archived at \\d{4}-[^)]+\\)\\n$`),
      );

      // The tail cut (by someone who lifted the triggers) after a second checkpoint covered it.
      expect((await runCli(['audit', 'checkpoint'], t.env)).code).toBe(0);
      await liftAppendOnly(t.db.kysely, kind);
      const rows = await events();
      await t.db.kysely.deleteFrom('auditEvents').where('seq', '>', rows[1]!.seq).execute();
      const truncated = await runCli(pinned, t.env);
      expect(truncated.code).toBe(1);
      expect(truncated.stdout).toMatch(/^broken: problem truncated: checkpoint 2 vouches for 125 events up to seq \d+; the chain ends after 122 at seq \d+\n$/);
    } finally {
      fs.rmSync(file, { force: true });
    }
  });

  it('tail -n prints the last N events, oldest first, one JSON object per line', async () => {
    await record(0, 5);
    const rows = await events();
    const result = await runCli(['audit', 'tail', '-n', '2'], t.env);
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n').map((line) => JSON.parse(line));
    expect(lines).toEqual(rows.slice(3).map((row) => ({ ...row })));
    expect(lines.map((e) => e.requestId)).toEqual(['req-3', 'req-4']);

    const defaults = await runCli(['audit', 'tail'], t.env);
    expect(defaults.stdout.trimEnd().split('\n')).toHaveLength(5);
    expect((await runCli(['audit', 'tail', '-n', 'x'], t.env)).code).toBe(2);
  });

  it('tail --follow prints events written later and exits 0 on SIGTERM', async () => {
    await record(0, 3);
    const cli = startCli(['audit', 'tail', '-n', '1', '--follow'], t.env);
    await waitFor(() => cli.stdout().includes('"req-2"'), 'the initial event');
    await record(3, 2);
    await waitFor(() => cli.stdout().includes('"req-4"'), 'the followed events');
    cli.child.kill('SIGTERM');
    const result = await cli.result;
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(result.stdout.trimEnd().split('\n').map((line) => JSON.parse(line).requestId)).toEqual(['req-2', 'req-3', 'req-4']);
  });
});
