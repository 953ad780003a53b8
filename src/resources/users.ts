import type { components } from '../../generated/openapi.js';
import { toUserRecord, USER_COLUMNS } from '../storage/users.js';
import { defineResource } from './resource-module.js';

export type UserView = components['schemas']['User'];

/** Users: read without the password hash or the revocation count, listed by role and status. */
export const users = defineResource<UserView>({
  type: 'user',
  table: { name: 'users', columns: USER_COLUMNS },
  fromRow: (row) => ({ ...toUserRecord(row as never) }),
  filters: ['role', 'active'],
});
