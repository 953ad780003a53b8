import { ApiError } from '../errors/registry.js';
import { decodeCursor, type Page, type PageRequest } from '../storage/paging.js';

/** The page a list request asks for; a cursor this API did not issue is a validation failure. */
export function pageRequest(query: { limit?: number; page?: number; after?: string }): PageRequest {
  let afterId: string | undefined;
  if (query.after !== undefined) {
    afterId = decodeCursor(query.after) ?? undefined;
    if (afterId === undefined) {
      throw new ApiError('VALIDATION_FAILED', 'The cursor is not valid.', { details: [{ path: '/query/after', message: 'is not a cursor from this API' }] });
    }
  }
  return { limit: query.limit ?? 20, page: query.page, afterId };
}

export function pageBody<T>(data: T[], page: Page<unknown>, limit: number): { data: T[]; page: { limit: number; next: string | null } } {
  return { data, page: { limit, next: page.next } };
}
