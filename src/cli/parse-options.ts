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
    parsed = parseArgs({ args: [...args], options, strict: true, allowPositionals: true });
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
