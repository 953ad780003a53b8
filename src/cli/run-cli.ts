import { ConfigError } from '../config/config.js';
import { AuditKeyDecryptionError } from '../audit/checkpoints.js';
import { KeyDecryptionError } from '../oauth/keys/key-encryption.js';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError } from './cli-errors.js';
import type { Command, CommandGroup } from './command.js';
import { COMMAND_GROUPS } from './commands.js';
import { formatCommandHelp, formatGroupHelp, formatTopHelp, helpHint } from './help.js';
import { withDatabase } from './open-database.js';
import { parseCommandLine } from './parse-options.js';

const HELP_WORDS = new Set(['--help', '-h', 'help']);

type Resolved =
  | { kind: 'help'; text: string }
  | { kind: 'command'; group: CommandGroup; command: Command; path: string; args: readonly string[] };

/**
 * Finds what argv names: `<command>` (top-level, e.g. `migrate`), `<group> <command>`, or a help request
 * (`--help`, `help`, `help <group> [<command>]`, `<group> --help`). Anything else is a usage error.
 */
function resolveCommand(argv: readonly string[], groups: readonly CommandGroup[]): Resolved {
  const [first, ...rest] = argv;
  if (first === undefined) throw new UsageError('missing command');
  if (HELP_WORDS.has(first)) {
    if (rest.length === 0) return { kind: 'help', text: formatTopHelp(groups) };
    const target = resolveCommand([...rest, '--help'], groups);
    if (target.kind === 'help') return target;
    return { kind: 'help', text: formatCommandHelp(target.group, target.command) };
  }
  const topLevel = groups.find((g) => g.name === '');
  const single = topLevel?.commands.find((c) => c.name === first);
  if (topLevel && single) return { kind: 'command', group: topLevel, command: single, path: first, args: rest };
  const group = groups.find((g) => g.name !== '' && g.name === first);
  if (!group) throw new UsageError(`unknown command '${first}'`);
  const [name, ...args] = rest;
  if (name !== undefined && HELP_WORDS.has(name)) return { kind: 'help', text: formatGroupHelp(group) };
  if (name === undefined) throw new UsageError(`missing command after '${group.name}'`, group.name);
  const command = group.commands.find((c) => c.name === name);
  if (!command) throw new UsageError(`unknown command '${group.name} ${name}'`, group.name);
  return { kind: 'command', group, command, path: `${group.name} ${name}`, args };
}

/** The whole command line: returns the exit code and never throws. */
export async function runCli(argv: readonly string[], groups: readonly CommandGroup[] = COMMAND_GROUPS): Promise<number> {
  let path = '';
  try {
    const resolved = resolveCommand(argv, groups);
    if (resolved.kind === 'help') {
      process.stdout.write(`${resolved.text}\n`);
      return EXIT_OK;
    }
    const { group, command } = resolved;
    path = resolved.path;
    const parsed = parseCommandLine(command, resolved.args, path);
    if (parsed.help) {
      process.stdout.write(`${formatCommandHelp(group, command)}\n`);
      return EXIT_OK;
    }
    const schema = command.managesSchema === true;
    return await withDatabase({ migrate: !schema && command.leavesSchema !== true, create: schema }, (context) => command.run(parsed.input, context));
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`error: ${error.message}\n${helpHint(error.helpFor ?? path)}\n`);
      return EXIT_USAGE;
    }
    // The same report as an invalid setting (loadConfigOrExit): the operator fixes the environment.
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return EXIT_CONFIG;
    }
    // A secret that opens none of the stored keys is the environment's fault as well.
    if (error instanceof KeyDecryptionError || error instanceof AuditKeyDecryptionError) {
      process.stderr.write(`error: ${error.message}\n`);
      return EXIT_CONFIG;
    }
    // The message only: a stack trace or a driver error's detail could carry values (SQL parameters,
    // connection strings) that do not belong on an operator's terminal or in CI logs.
    process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
    return EXIT_FAILURE;
  }
}
