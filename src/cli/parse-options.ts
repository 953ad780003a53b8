import { parseArgs, type ParseArgsConfig } from 'node:util';
import { UsageError } from './cli-errors.js';
import type { Command, CommandInput } from './command.js';

export type ParsedCommandLine = { help: true } | { help: false; input: CommandInput };

/**
 * Parses one command's arguments with node:util parseArgs in strict mode, so an unknown option, a
 * missing value or a stray positional is a usage error rather than something silently ignored.
 */
export function parseCommandLine(command: Command, args: readonly string[], helpFor: string): ParsedCommandLine {
  const options: NonNullable<ParseArgsConfig['options']> = { help: { type: 'boolean', short: 'h' } };
  for (const [name, spec] of Object.entries(command.options)) {
    options[name] = { type: spec.type, ...(spec.short ? { short: spec.short } : {}), ...(spec.multiple ? { multiple: true } : {}) };
  }
  let parsed;
  try {
    parsed = parseArgs({ args: attachDashValues(args, options), options, strict: true, allowPositionals: true });
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error), helpFor);
  }
  const { help, ...values } = parsed.values;
  if (help) return { help: true };

  const expected = command.positionals ?? [];
  if (parsed.positionals.length < expected.length) {
    throw new UsageError(`missing ${expected.slice(parsed.positionals.length).join(' ')}`, helpFor);
  }
  if (parsed.positionals.length > expected.length) {
    throw new UsageError(`unexpected argument '${parsed.positionals[expected.length]}'`, helpFor);
  }
  for (const [name, spec] of Object.entries(command.options)) {
    if (spec.required && values[name] === undefined) throw new UsageError(`missing required option --${name}`, helpFor);
  }
  return { help: false, input: { options: values, positionals: parsed.positionals } };
}

/**
 * `--name -value` as `--name=-value` for an option that takes a value, when `-value` names no option: a
 * base64url value (a key fingerprint, a secret) may begin with a dash, and parseArgs would call it
 * ambiguous. `--` still ends the options.
 */
function attachDashValues(args: readonly string[], options: NonNullable<ParseArgsConfig['options']>): string[] {
  const takesValue = (arg: string) => arg.startsWith('--') && !arg.includes('=') && options[arg.slice(2)]?.type === 'string';
  const namesOption = (arg: string) =>
    arg === '--' ||
    (arg.startsWith('--') ? options[arg.slice(2).split('=')[0]!] !== undefined : Object.values(options).some((option) => option.short !== undefined && arg.startsWith(`-${option.short}`)));
  const result: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      result.push(...args.slice(i));
      break;
    }
    const next = args[i + 1];
    if (takesValue(arg) && next !== undefined && next.startsWith('-') && next.length > 1 && !namesOption(next)) {
      result.push(`${arg}=${next}`);
      i++;
    } else {
      result.push(arg);
    }
  }
  return result;
}
