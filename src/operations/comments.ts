import { whereEqual } from '../storage/filter-sql.js';
import { newId, nowIso } from '../storage/ids.js';
import { expandAll, expandSet } from './expand.js';
import { listReadable, pageBody, pageRequest } from './resources.js';
import { callerId } from './subject.js';
import type { Handler } from './types.js';
import { viewOf } from './views.js';

export const listPostComments: Handler<'listPostComments'> = async ({ params, query }, { principal, deps }) => {
  // The post itself was loaded and its read rule checked by the pipeline (x-resource).
  const page = await listReadable(deps, principal, 'comment', whereEqual({ postId: params.postId }), pageRequest(query));
  const data = await expandAll(deps, principal, 'comment', page.rows, expandSet(query.expand));
  return { status: 200, body: pageBody(data, page, query.limit ?? 20) };
};

export const createComment: Handler<'createComment'> = async ({ params, body }, { principal, deps }) => {
  const now = nowIso();
  const row = { id: newId(), postId: params.postId, authorId: callerId(principal), body: body.body, createdAt: now, updatedAt: now };
  await deps.db.insertInto('comments').values(row).execute();
  return { status: 201, body: viewOf('comment', row), headers: { location: `/v1/comments/${row.id}` } };
};

export const getComment: Handler<'getComment'> = async ({ query }, { principal, resource, deps }) => {
  const [comment] = await expandAll(deps, principal, 'comment', [resource!], expandSet(query.expand));
  return { status: 200, body: comment! };
};

export const replaceComment: Handler<'replaceComment'> = async ({ body }, { resource, deps }) => {
  const current = viewOf('comment', resource!);
  await deps.db.updateTable('comments').set({ body: body.body, updatedAt: nowIso() }).where('id', '=', current.id).execute();
  return { status: 200, body: { ...current, body: body.body } };
};

export const deleteComment: Handler<'deleteComment'> = async (_input, { resource, deps }) => {
  await deps.db.deleteFrom('comments').where('id', '=', viewOf('comment', resource!).id).execute();
  return { status: 204, body: undefined };
};
