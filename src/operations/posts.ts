import { whereEqual } from '../storage/filter-sql.js';
import { newId, nowIso } from '../storage/ids.js';
import { expandAll, expandSet } from './expand.js';
import { listReadable, pageBody, pageRequest } from './resources.js';
import { callerId } from './subject.js';
import type { Handler } from './types.js';
import { viewOf, type PostView } from './views.js';

export const listPosts: Handler<'listPosts'> = async ({ query }, { principal, deps }) => {
  const page = await listReadable(deps, principal, 'post', whereEqual({ status: query.status, authorId: query.authorId }), pageRequest(query));
  const data = await expandAll(deps, principal, 'post', page.rows, expandSet(query.expand));
  return { status: 200, body: pageBody(data, page, query.limit ?? 20) };
};

export const listUserPosts: Handler<'listUserPosts'> = async ({ params, query }, { principal, deps }) => {
  const page = await listReadable(deps, principal, 'post', whereEqual({ authorId: params.userId, status: query.status }), pageRequest(query));
  const data = await expandAll(deps, principal, 'post', page.rows, expandSet(query.expand));
  return { status: 200, body: pageBody(data, page, query.limit ?? 20) };
};

export const getPost: Handler<'getPost'> = async ({ query }, { principal, resource, deps }) => {
  const [post] = await expandAll(deps, principal, 'post', [resource!], expandSet(query.expand));
  return { status: 200, body: post! };
};

export const createPost: Handler<'createPost'> = async ({ body }, { principal, deps }) => {
  const now = nowIso();
  // The author is the caller, never a field of the body (no mass assignment).
  const post: PostView = { id: newId(), authorId: callerId(principal), title: body.title, body: body.body, status: body.status ?? 'draft', createdAt: now, updatedAt: now };
  await deps.db.insertInto('posts').values(post).execute();
  return { status: 201, body: post, headers: { location: `/v1/posts/${post.id}` } };
};

export const replacePost: Handler<'replacePost'> = async ({ body }, { resource, deps }) => {
  const current = viewOf('post', resource!);
  const next = { title: body.title, body: body.body, status: body.status, updatedAt: nowIso() };
  await deps.db.updateTable('posts').set(next).where('id', '=', current.id).execute();
  return { status: 200, body: { ...current, ...next } };
};

export const deletePost: Handler<'deletePost'> = async (_input, { resource, deps }) => {
  const { id } = viewOf('post', resource!);
  await deps.db.transaction().execute(async (trx) => {
    await trx.deleteFrom('comments').where('postId', '=', id).execute();
    await trx.deleteFrom('posts').where('id', '=', id).execute();
  });
  return { status: 204, body: undefined };
};
