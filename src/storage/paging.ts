import type { Kysely } from 'kysely';
import type { Where } from './filter-sql.js';
import type { Database } from './schema.js';

export interface PageRequest {
  limit: number;
  /** 1-based offset page; ignored when `after` is given. */
  page?: number | undefined;
  /** The id the page starts after: a previous page's `next`, decoded by decodeCursor. */
  afterId?: string | undefined;
}

export interface Page<T> {
  rows: T[];
  /** Cursor for the following page, or null on the last page. */
  next: string | null;
}

const CURSOR_VERSION = 1;
/** The contract's Id: a cursor that decodes to anything else was not issued here, so it is refused, not compared. */
const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Cursors are opaque to clients: a versioned, base64url-encoded position (the last id seen). */
export function encodeCursor(id: string): string {
  return Buffer.from(JSON.stringify([CURSOR_VERSION, id])).toString('base64url');
}

/** The id a cursor carries, or null when it is not a cursor this API issued (the caller refuses it). */
export function decodeCursor(cursor: string): string | null {
  try {
    const decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(decoded) && decoded[0] === CURSOR_VERSION && typeof decoded[1] === 'string' && ID.test(decoded[1])) {
      return decoded[1];
    }
  } catch {
    // not JSON: not a cursor
  }
  return null;
}


/**
 * One page of a table in id order (ids are time-ordered, so this is creation order). With `afterId`, the
 * page starts strictly after that id, so rows inserted meanwhile are neither skipped nor repeated.
 */
export async function selectPage<T>(
  db: Kysely<Database>,
  table: keyof Database,
  where: Where[],
  request: PageRequest,
  columns?: readonly string[],
): Promise<Page<T>> {
  const rows = (await pageQuery(db, table, where, request, columns).execute()) as (T & { id: string })[];
  return pageOf(rows, request.limit);
}

/**
 * The page's query: the conditions, then `id > afterId`, `order by id`, `limit` (one more row than the
 * page, to know whether another follows) and `offset` — bound in that order.
 */
export function pageQuery(db: Kysely<Database>, table: keyof Database, where: Where[], request: PageRequest, columns?: readonly string[]) {
  let query = db.selectFrom(table as 'posts') as any;
  query = columns ? query.select(columns) : query.selectAll();
  for (const condition of where) query = query.where(condition);
  if (request.afterId !== undefined) query = query.where('id', '>', request.afterId);
  query = query.orderBy('id', 'asc').limit(request.limit + 1);
  const offset = pageOffset(request);
  if (offset !== null) query = query.offset(offset);
  return query as { execute(): Promise<unknown[]>; compile(): import('kysely').CompiledQuery };
}

/** Rows skipped by `page`; a cursor takes precedence over `page` (the contract says so; `page` has a default of 1). */
export function pageOffset(request: PageRequest): number | null {
  return request.afterId === undefined && request.page !== undefined && request.page > 1 ? (request.page - 1) * request.limit : null;
}

/** The page from the rows read (one more than the page when another follows). */
export function pageOf<T extends { id: string }>(rows: T[], limit: number): Page<T> {
  const hasMore = rows.length > limit;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  return { rows: pageRows, next: hasMore ? encodeCursor(pageRows[pageRows.length - 1]!.id) : null };
}
