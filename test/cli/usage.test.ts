import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { COMMAND_GROUPS } from '../../src/cli/commands.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { CLI_TEST_TIMEOUT, openCliDatabase, REPO_ROOT, runCli, startCli, type CliDatabase } from './cli-process.js';

const COMMANDS = [
  'users create', 'users list', 'users deactivate',
  'clients create', 'clients list', 'clients show', 'clients rotate-secret', 'clients delete',
  'keys list', 'keys rotate', 'keys rewrap', 'audit verify', 'audit tail', 'migrate', 'backup',
];

describe('portcullis command line', { timeout: CLI_TEST_TIMEOUT }, () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });
  /** An empty DATA_DIR: usage errors must be reported before anything touches it. */
  function emptyDataDir(): { DATA_DIR: string } {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-cli-usage-'));
    dirs.push(dir);
    return { DATA_DIR: path.join(dir, 'data') };
  }

  it('--help and help list every command on stdout, exit 0', async () => {
    for (const args of [['--help'], ['-h'], ['help']]) {
      const result = await runCli(args, emptyDataDir());
      expect(result.code).toBe(0);
      expect(result.stderr).toBe('');
      expect(result.stdout).toMatch(/^Usage: portcullis <command> \[options\]\n/);
      for (const command of COMMANDS) expect(result.stdout).toMatch(new RegExp(`\\n  ${command} +\\S`));
    }
  });

  it('help per group and per command', async () => {
    const group = await runCli(['users', '--help'], emptyDataDir());
    expect(group.code).toBe(0);
    expect(group.stdout).toMatch(/^Usage: portcullis users <command> \[options\]\n\nManage user accounts\.\n\nCommands:\n  create +.*\n  list +.*\n  deactivate +/);
    expect((await runCli(['help', 'users'], emptyDataDir())).stdout).toBe(group.stdout);

    const command = await runCli(['users', 'create', '--help'], emptyDataDir());
    expect(command.code).toBe(0);
    expect(command.stdout).toMatch(/^Usage: portcullis users create --email EMAIL --name NAME --role ROLE \[--password PASSWORD\] \[--json\]\n/);
    expect(command.stdout).toContain('  -h, --help ');
    expect((await runCli(['help', 'users', 'create'], emptyDataDir())).stdout).toBe(command.stdout);

    const tail = await runCli(['audit', 'tail', '-h'], emptyDataDir());
    expect(tail.stdout).toContain('  -n, --lines N ');
    expect(tail.stdout).toContain('  -f, --follow ');
  });

  it('unknown commands, unknown options and missing arguments exit 2 with a usage hint on stderr', async () => {
    const env = emptyDataDir();
    expect(await runCli(['frobnicate'], env)).toEqual({ code: 2, stdout: '', stderr: "error: unknown command 'frobnicate'\nRun 'portcullis --help' for usage.\n" });
    expect(await runCli(['users', 'purge'], env)).toEqual({ code: 2, stdout: '', stderr: "error: unknown command 'users purge'\nRun 'portcullis users --help' for usage.\n" });
    expect(await runCli(['users'], env)).toEqual({ code: 2, stdout: '', stderr: "error: missing command after 'users'\nRun 'portcullis users --help' for usage.\n" });
    expect(await runCli([], env)).toEqual({ code: 2, stdout: '', stderr: "error: missing command\nRun 'portcullis --help' for usage.\n" });

    const unknownOption = await runCli(['users', 'list', '--colour'], env);
    expect(unknownOption.code).toBe(2);
    expect(unknownOption.stderr).toMatch(/^error: Unknown option '--colour'.*\nRun 'portcullis users list --help' for usage\.\n$/s);
    const missingValue = await runCli(['users', 'create', '--email'], env);
    expect(missingValue.code).toBe(2);
    expect(missingValue.stderr).toMatch(/^error: Option '--email <value>' argument missing\nRun 'portcullis users create --help' for usage\.\n$/);
    expect(await runCli(['clients', 'delete'], env)).toEqual({ code: 2, stdout: '', stderr: "error: missing <client_id>\nRun 'portcullis clients delete --help' for usage.\n" });
    expect(await runCli(['keys', 'list', 'extra'], env)).toEqual({ code: 2, stdout: '', stderr: "error: unexpected argument 'extra'\nRun 'portcullis keys list --help' for usage.\n" });
    expect(fs.existsSync(env.DATA_DIR)).toBe(false);
  });

  it('an invalid configuration exits 78 listing every problem, before opening the database', async () => {
    const env = { ...emptyDataDir(), ACCESS_TOKEN_TTL: '5', PORT: 'eighty' };
    const result = await runCli(['users', 'list'], env);
    expect(result).toMatchObject({ code: 78, stdout: '' });
    expect(result.stderr).toMatch(/^Invalid configuration:\n/);
    expect(result.stderr).toContain('\n  - PORT: must be an integer, got "eighty"\n');
    expect(result.stderr).toContain('\n  - ACCESS_TOKEN_TTL: must be between 300 and 3600, got 5\n');
    expect(fs.existsSync(env.DATA_DIR)).toBe(false);
  });

  it('refuses a DATA_DIR without a database with exit 78, naming the file and the fix, and creates nothing', async () => {
    const env = emptyDataDir();
    const file = path.join(env.DATA_DIR, 'portcullis.db');
    const stderr =
      'Invalid configuration:\n' +
      `  - DATA_DIR: there is no database at ${file}; set DATA_DIR to the server's data directory (or DATABASE_URL for PostgreSQL), or run 'portcullis migrate' to create a new database there\n`;
    const commands = [
      ['users', 'list'],
      ['users', 'create', '--email', 'a@example.com', '--name', 'A', '--role', 'member'],
      ['clients', 'list'],
      ['keys', 'rotate'],
      ['audit', 'verify'],
      ['backup', path.join(path.dirname(env.DATA_DIR), 'copy.db')],
    ];
    for (const args of commands) {
      expect({ args, result: await runCli(args, env) }).toEqual({ args, result: { code: 78, stdout: '', stderr } });
    }
    expect(fs.existsSync(env.DATA_DIR)).toBe(false);
    expect(fs.existsSync(path.join(path.dirname(env.DATA_DIR), 'copy.db'))).toBe(false);
    // An existing directory without the file is refused the same way, and stays empty.
    fs.mkdirSync(env.DATA_DIR);
    expect(await runCli(['users', 'list'], env)).toEqual({ code: 78, stdout: '', stderr });
    expect(fs.readdirSync(env.DATA_DIR)).toEqual([]);
  });

  it('migrate creates the database in a new DATA_DIR; the other commands then work on it', async () => {
    const env = emptyDataDir();
    const migrated = await runCli(['migrate'], env);
    expect(migrated).toMatchObject({ code: 0, stderr: '' });
    expect(migrated.stdout).toMatch(/^sqlite: applied 001-initial(, [\w-]+)+\n$/);
    expect(fs.existsSync(path.join(env.DATA_DIR, 'portcullis.db'))).toBe(true);
    expect(await runCli(['users', 'list'], env)).toEqual({ code: 0, stdout: '(none)\n', stderr: '' });
  });

  it('bin/portcullis.js works from another working directory', async () => {
    const cli = startCli(['--help'], emptyDataDir(), [path.join(REPO_ROOT, 'bin/portcullis.js')], os.tmpdir());
    const result = await cli.result;
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(result.stdout).toMatch(/^Usage: portcullis <command> \[options\]\n/);
  });
});

describe('the README\'s command summary', () => {
  const readme = fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Operate it'));
  const block = section.slice(section.indexOf('```\n') + 4, section.indexOf('\n```', section.indexOf('```\n') + 4));
  const paths = COMMAND_GROUPS.flatMap((group) => group.commands.map((command) => ({ group, command, path: group.name === '' ? command.name : `${group.name} ${command.name}` })));
  /** Where each command's summary starts in the block: at a line start or after ` | `. */
  const starts = paths.map(({ path: name }) => ({ name, at: new RegExp(`(^|\\| )${name}( |$)`, 'm').exec(block)?.index ?? -1 }));

  it('names every command, with every option its --help shows', () => {
    expect(starts.filter(({ at }) => at < 0).map(({ name }) => name)).toEqual([]);
    const ordered = [...starts].sort((a, b) => a.at - b.at);
    const missing: string[] = [];
    for (const { command, path: name } of paths) {
      const index = ordered.findIndex((start) => start.name === name);
      const summary = block.slice(ordered[index]!.at, ordered[index + 1]?.at ?? block.length);
      for (const [option, spec] of Object.entries(command.options)) {
        const named = summary.includes(`--${option}`) || (spec.short !== undefined && summary.includes(`-${spec.short} `));
        if (!named) missing.push(`${name} --${option}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe.each(DATABASE_KINDS)('portcullis migrate on %s', { timeout: CLI_TEST_TIMEOUT }, (kind) => {
  let t: CliDatabase | null = null;
  afterEach(async () => {
    await t?.close();
    t = null;
  });

  it('applies pending migrations once, then reports the database up to date', async () => {
    if (kind === 'sqlite') {
      // A fresh DATA_DIR, not the helper's (already migrated) one.
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-cli-migrate-'));
      try {
        const first = await runCli(['migrate'], { DATA_DIR: dir });
        expect(first).toMatchObject({ code: 0, stderr: '' });
        expect(first.stdout).toMatch(/^sqlite: applied 001-initial(, [\w-]+)+\n$/);
        expect(await runCli(['migrate'], { DATA_DIR: dir })).toEqual({ code: 0, stdout: 'sqlite: already up to date\n', stderr: '' });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    } else {
      t = await openCliDatabase(kind);
      expect(await runCli(['migrate'], t.env)).toEqual({ code: 0, stdout: 'postgres: already up to date\n', stderr: '' });
    }
  });
});
