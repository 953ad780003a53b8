import { ApiError } from '../errors/registry.js';
import { newId, nowIso } from '../storage/ids.js';
import { isForeignKeyViolation } from '../storage/unique-violation.js';
import { insertRow, updateRow } from '../storage/resource-rows.js';
import { comments } from '../resources/comments.js';
import { deleteResources } from '../resources/delete.js';
import { expandAll } from '../resources/expand.js';
import { listReadable } from '../resources/lists.js';
import { thenMaybe } from '../policy/maybe-promise.js';
import { pageBody, pageRequest } from './pages.js';
import { callerId } from './subject.js';
import type { Handler } from './types.js';

export const listPostComments: Handler<'listPostComments'> = async ({ params, query }, { principal, deps, loaders }) => {
  // The post itself was loaded and its read rule checked by the pipeline (x-resource).
  const page = await listReadable(deps, principal, comments, { postId: params.postId }, pageRequest(query));
  const data = await expandAll({ principal, loaders, policy: deps.policy }, comments, page.rows, query.expand);
  return { status: 200, body: pageBody(data, page, query.limit ?? 20) };
};

export const createComment: Handler<'createComment'> = async ({ params, body }, { principal, deps }) => {
  const now = nowIso();
  const row = { id: newId(), postId: params.postId, authorId: callerId(principal), body: body.body, createdAt: now, updatedAt: now };
  await insertRow(deps.db, deps.sqlite, comments.table, row).catch((error: unknown) => {
    // The post was deleted after the pipeline loaded it: answered as if it had been gone already.
    throw isForeignKeyViolation(error) ? new ApiError('NOT_FOUND') : error;
  });
  deps.events.publish('commentAdded', comments.viewOf(row));
  return { status: 201, body: comments.viewOf(row), headers: { location: `/v1/comments/${row.id}` } };
};

export const getComment: Handler<'getComment'> = ({ query }, { principal, resource, deps, loaders }) =>
  thenMaybe(expandAll({ principal, loaders, policy: deps.policy }, comments, [resource!], query.expand), ([comment]) => ({ status: 200, body: comment! }));

export const replaceComment: Handler<'replaceComment'> = async ({ body }, { resource, deps }) => {
  const current = comments.viewOf(resource!);
  // The body is the only field a comment's write sets: nothing read earlier is written back. A comment deleted
  // after the pipeline loaded it has no row to write: answered as if it had been gone already.
  if (!(await updateRow(deps.db, deps.sqlite, comments.table, current.id, null, { body: body.body, updatedAt: nowIso() }))) throw new ApiError('NOT_FOUND');
  return { status: 200, body: { ...current, body: body.body } };
};

export const deleteComment: Handler<'deleteComment'> = async (_input, { resource, deps }) => {
  await deleteResources(deps.db, deps.resources, comments, [comments.viewOf(resource!).id]);
  return { status: 204, body: undefined };
};
