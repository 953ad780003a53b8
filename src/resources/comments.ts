import type { components } from '../../generated/openapi.js';
import { defineResource } from './resource-module.js';

export type CommentView = components['schemas']['Comment'];

/** Comments: listed per post, deleted with it; `expand=` embeds the author and the post. */
export const comments = defineResource<CommentView>({
  type: 'comment',
  table: { name: 'comments', columns: ['id', 'postId', 'authorId', 'body', 'createdAt'] },
  expansions: { author: { via: 'authorId', type: 'user' }, post: { via: 'postId', type: 'post' } },
  filters: ['postId'],
  deletedWith: { via: 'postId', type: 'post' },
});
