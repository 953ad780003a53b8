import { newId, nextVersion, nowIso } from '../storage/ids.js';
import { insertRow, updateRow } from '../storage/resource-rows.js';
import { deleteResources } from '../resources/delete.js';
import { expandAll } from '../resources/expand.js';
import { listReadable } from '../resources/lists.js';
import { posts, type PostView } from '../resources/posts.js';
import { thenMaybe } from '../policy/maybe-promise.js';
import { pageBody, pageRequest } from './pages.js';
import { callerId } from './subject.js';
import { changedMeanwhile } from './changed-meanwhile.js';
import type { Handler } from './types.js';

export const listPosts: Handler<'listPosts'> = async ({ query }, { principal, deps, loaders }) => {
  const page = await listReadable(deps, principal, posts, query, pageRequest(query));
  const data = await expandAll({ principal, loaders, policy: deps.policy }, posts, page.rows, query.expand);
  return { status: 200, body: pageBody(data, page, query.limit ?? 20) };
};

export const listUserPosts: Handler<'listUserPosts'> = async ({ params, query }, { principal, deps, loaders }) => {
  const page = await listReadable(deps, principal, posts, { ...query, authorId: params.userId }, pageRequest(query));
  const data = await expandAll({ principal, loaders, policy: deps.policy }, posts, page.rows, query.expand);
  return { status: 200, body: pageBody(data, page, query.limit ?? 20) };
};

export const getPost: Handler<'getPost'> = ({ query }, { principal, resource, deps, loaders }) =>
  thenMaybe(expandAll({ principal, loaders, policy: deps.policy }, posts, [resource!], query.expand), ([post]) => ({ status: 200, body: post! }));

export const createPost: Handler<'createPost'> = async ({ body }, { principal, deps }) => {
  const now = nowIso();
  // The author is the caller, never a field of the body (no mass assignment).
  const post: PostView = { id: newId(), authorId: callerId(principal), title: body.title, body: body.body, status: body.status ?? 'draft', createdAt: now, updatedAt: now };
  await insertRow(deps.db, deps.sqlite, posts.table, post);
  if (post.status === 'published') deps.events.publish('postPublished', post);
  return { status: 201, body: post, headers: { location: `/v1/posts/${post.id}` } };
};

export const replacePost: Handler<'replacePost'> = async ({ body }, { resource, deps }) => {
  const current = posts.viewOf(resource!);
  const next = { title: body.title, body: body.body, status: body.status, updatedAt: nextVersion(current.updatedAt) };
  if (!(await updateRow(deps.db, deps.sqlite, posts.table, current.id, current.updatedAt, next))) throw changedMeanwhile();
  const replaced = { ...current, ...next };
  if (current.status !== 'published' && replaced.status === 'published') deps.events.publish('postPublished', replaced);
  return { status: 200, body: replaced };
};

export const deletePost: Handler<'deletePost'> = async (_input, { resource, deps }) => {
  // Its comments go with it (the comment module's `deletedWith`).
  await deleteResources(deps.db, deps.resources, posts, [posts.viewOf(resource!).id]);
  return { status: 204, body: undefined };
};
