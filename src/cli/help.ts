import type { Command, CommandGroup, OptionSpec } from './command.js';

export const PROGRAM = 'portcullis';

const HELP_OPTION: OptionSpec = { type: 'boolean', short: 'h', description: 'show this help' };

function commandPath(group: CommandGroup, command: Command): string {
  return group.name === '' ? command.name : `${group.name} ${command.name}`;
}

function optionLabel(name: string, spec: OptionSpec): string {
  const flag = `${spec.short ? `-${spec.short}, ` : ''}--${name}`;
  return spec.type === 'string' ? `${flag} ${spec.value ?? 'VALUE'}` : flag;
}

function formatColumns(rows: readonly [string, string][]): string[] {
  const width = Math.max(...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`);
}

export function formatUsageLine(group: CommandGroup, command: Command): string {
  const parts = [`${PROGRAM} ${commandPath(group, command)}`, ...(command.positionals ?? [])];
  for (const [name, spec] of Object.entries(command.options)) {
    const label = optionLabel(name, spec).replace(/^-\w, /, '');
    const repeated = spec.multiple ? `${label} ...` : label;
    parts.push(spec.required ? repeated : `[${repeated}]`);
  }
  return parts.join(' ');
}

export function formatTopHelp(groups: readonly CommandGroup[]): string {
  const rows = groups.flatMap((group) => group.commands.map((c): [string, string] => [commandPath(group, c), c.summary]));
  return [
    `Usage: ${PROGRAM} <command> [options]`,
    '',
    'Operator commands for Portcullis. They work on the database the server uses (DATA_DIR, or',
    'DATABASE_URL for PostgreSQL) and apply pending migrations first, as the server does at start.',
    "Only 'migrate' creates a database: the others refuse a DATA_DIR without one (exit 78).",
    '',
    'Commands:',
    ...formatColumns(rows),
    '',
    `Run '${PROGRAM} <group> --help' or '${PROGRAM} <group> <command> --help' for details.`,
    'Exit codes: 0 success, 1 failure, 2 usage error, 78 configuration error.',
  ].join('\n');
}

export function formatGroupHelp(group: CommandGroup): string {
  return [
    `Usage: ${PROGRAM} ${group.name} <command> [options]`,
    '',
    group.summary,
    '',
    'Commands:',
    ...formatColumns(group.commands.map((c): [string, string] => [c.name, c.summary])),
    '',
    `Run '${PROGRAM} ${group.name} <command> --help' for a command's options.`,
  ].join('\n');
}

export function formatCommandHelp(group: CommandGroup, command: Command): string {
  const options = { ...command.options, help: HELP_OPTION };
  const rows = Object.entries(options).map(([name, spec]): [string, string] => [
    optionLabel(name, spec),
    `${spec.description}${spec.multiple ? ' (repeatable)' : ''}`,
  ]);
  return [`Usage: ${formatUsageLine(group, command)}`, '', command.summary, '', 'Options:', ...formatColumns(rows)].join('\n');
}

export function helpHint(path: string): string {
  return `Run '${PROGRAM}${path ? ` ${path}` : ''} --help' for usage.`;
}
