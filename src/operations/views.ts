import type { components } from '../../generated/openapi.js';
import type { ResourceRow } from '../policy/resource-rule.js';

type Schemas = components['schemas'];

export type UserView = Schemas['User'];
export type PostView = Schemas['Post'];
export type CommentView = Schemas['Comment'];
export type ClientView = Schemas['Client'];
export type AuditEventView = Schemas['AuditEvent'];

/** The contract schema each resource type is served as. */
export interface Views {
  user: UserView;
  post: PostView;
  comment: CommentView;
  client: ClientView;
}

/**
 * The pipeline and the policy layer carry resources as plain rows. A row of a type's table has that type's
 * contract shape — tables are written only from validated contract inputs (storage/schema.ts,
 * resources.ts `toResource`) — and this is the one place that says so to the type checker.
 */
export function viewOf<T extends keyof Views>(_type: T, row: ResourceRow): Views[T] {
  return row as unknown as Views[T];
}

export function viewsOf<T extends keyof Views>(type: T, rows: ResourceRow[]): Views[T][] {
  return rows.map((row) => viewOf(type, row));
}
