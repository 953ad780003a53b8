import { describe, expect, it } from 'vitest';
import { EXIT_OK, UsageError } from '../../src/cli/cli-errors.js';
import type { Command } from '../../src/cli/command.js';
import { parseCommandLine } from '../../src/cli/parse-options.js';

const command: Command = {
  name: 'verify',
  summary: 'test command',
  positionals: [],
  options: {
    'key-fingerprint': { type: 'string', description: 'a base64url value' },
    json: { type: 'boolean', short: 'j', description: 'JSON' },
  },
  run: async () => EXIT_OK,
};

const parse = (args: string[]) => parseCommandLine(command, args, 'portcullis verify --help');

describe('command-line options', () => {
  it('takes a value that begins with a dash (a base64url fingerprint may) after an option that needs one', () => {
    expect(parse(['--key-fingerprint', '-gys69ozpn0bSbiA'])).toEqual({ help: false, input: { options: { 'key-fingerprint': '-gys69ozpn0bSbiA' }, positionals: [] } });
    expect(parse(['--key-fingerprint=-gys69', '--json'])).toEqual({ help: false, input: { options: { 'key-fingerprint': '-gys69', json: true }, positionals: [] } });
  });

  it('still refuses an option where a value belongs, an unknown option, and a value after --', () => {
    for (const args of [['--key-fingerprint', '--json'], ['--key-fingerprint', '-j'], ['--key-fingerprint'], ['--other', '-x'], ['--', '--key-fingerprint', '-x']]) {
      expect(() => parse(args), args.join(' ')).toThrow(UsageError);
    }
  });
});
