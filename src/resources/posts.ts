import type { components } from '../../generated/openapi.js';
import { defineResource } from './resource-module.js';

export type PostView = components['schemas']['Post'];

/** Posts: stored as served; `expand=author` embeds the author. */
export const posts = defineResource<PostView>({
  type: 'post',
  table: { name: 'posts', columns: ['id', 'authorId', 'title', 'body', 'status', 'createdAt', 'updatedAt'] },
  expansions: { author: { via: 'authorId', type: 'user' } },
  filters: ['status', 'authorId'],
});
