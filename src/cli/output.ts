/** Human output goes to stdout as aligned columns; `--json` output is one JSON document per line. */
export function writeLine(text: string): void {
  process.stdout.write(`${text}\n`);
}

export function writeJson(value: unknown): void {
  writeLine(JSON.stringify(value));
}

export function writeTable(rows: readonly Record<string, string>[], columns: readonly string[]): void {
  if (rows.length === 0) {
    writeLine('(none)');
    return;
  }
  const widths = columns.map((column) => Math.max(column.length, ...rows.map((row) => (row[column] ?? '').length)));
  const format = (cells: string[]) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  writeLine(format([...columns]));
  for (const row of rows) writeLine(format(columns.map((column) => row[column] ?? '')));
}

/** One record as `name: value` lines, the values aligned. */
export function writeFields(fields: readonly (readonly [string, string])[]): void {
  const width = Math.max(...fields.map(([name]) => name.length)) + 1;
  for (const [name, value] of fields) writeLine(`${`${name}:`.padEnd(width)} ${value}`);
}

/** `1 access token`, `3 access tokens`. */
export function formatCount(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
