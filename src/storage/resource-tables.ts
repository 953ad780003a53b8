import type { Database } from './schema.js';

/** Where each policy resource type lives. A new resource type in policy.yaml gets its table here. */
export const RESOURCE_TABLES = {
  user: 'users',
  post: 'posts',
  comment: 'comments',
  client: 'clients',
} as const satisfies Record<string, keyof Database>;

export type ResourceType = keyof typeof RESOURCE_TABLES;

export function tableFor(type: string): keyof Database {
  const table = (RESOURCE_TABLES as Record<string, keyof Database>)[type];
  if (!table) throw new Error(`no table for resource type ${type}`);
  return table;
}
