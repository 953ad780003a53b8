const names = new Map<string, string>();

function camelCase(column: string): string {
  let name = names.get(column);
  if (name === undefined) {
    name = column.replace(/_([a-z0-9])/g, (_match, letter: string) => letter.toUpperCase());
    names.set(column, name);
  }
  return name;
}

/** A row read with a direct statement, named as Kysely's CamelCasePlugin would name it (`author_id` -> `authorId`). */
export function camelCaseRow(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const column in row) out[camelCase(column)] = row[column];
  return out;
}
