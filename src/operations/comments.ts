import { whereEqual } from '../storage/filter-sql.js';
import { newId, nowIso } from '../storage/ids.js';
import { expandAll, expandSet } from './expand.js';
import { listReadable, pageBody, pageRequest } from './resources.js';
import { callerId } from './subject.js';
import type { Handler } from './types.js';

export const listPostComments: Handler<'listPostComments'> = async ({ params, query }, { principal, deps }) => {
  // The post itself was loaded and its read rule checked by the pipeline (x-resource).
  const page = await listReadable(deps, principal, 'comment', whereEqual({ postId: params.postId }), pageRequest(query));
  const data = await expandAll(deps, principal, 'comment', page.rows, expandSet(query.expand));
  return { status: 200, body: pageBody(data, page, query.limit ?? 20) as never };
};

export const createComment: Handler<'createComment'> = async ({ params, body }, { principal, deps }) => {
  const now = nowIso();
  const comment = { id: newId(), postId: params.postId, authorId: callerId(principal), body: body.body, createdAt: now, updatedAt: now };
  await deps.db.insertInto('comments').values(comment).execute();
  return { status: 201, body: comment as never, headers: { location: `/v1/comments/${comment.id}` } };
};

export const getComment: Handler<'getComment'> = async ({ query }, { principal, resource, deps }) => {
  const [comment] = await expandAll(deps, principal, 'comment', [resource!], expandSet(query.expand));
  return { status: 200, body: comment as never };
};

export const replaceComment: Handler<'replaceComment'> = async ({ body }, { resource, deps }) => {
  const updatedAt = nowIso();
  await deps.db.updateTable('comments').set({ body: body.body, updatedAt }).where('id', '=', String(resource!.id)).execute();
  return { status: 200, body: { ...resource, body: body.body, updatedAt } as never };
};

export const deleteComment: Handler<'deleteComment'> = async (_input, { resource, deps }) => {
  await deps.db.deleteFrom('comments').where('id', '=', String(resource!.id)).execute();
  return { status: 204, body: undefined as never };
};
