/** A column as Kysely's CamelCasePlugin names it in results (`author_id` -> `authorId`). */
function camelCase(column: string): string {
  return column.replace(/_([a-z0-9])/g, (_match, letter: string) => letter.toUpperCase());
}

/**
 * A direct SELECT whose rows come back named as Kysely would name them: the query is wrapped and each of
 * its columns aliased (`select "author_id" as "authorId" from (...)`), so no row is renamed in JavaScript.
 * Column names come from the statement itself (the schema), never from input.
 */
export function camelCaseSelect(sql: string, columns: readonly string[]): string {
  const aliased = columns.map((column) => `"${column}" as "${camelCase(column)}"`).join(', ');
  return `select ${aliased} from (${sql})`;
}
