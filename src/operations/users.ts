import { ApiError } from '../errors/registry.js';
import { hashPassword } from '../oauth/passwords.js';
import { revokeUserTokens } from '../oauth/tokens/access-token-records.js';
import { recordInvalidation } from '../storage/invalidations.js';
import { newId, nextVersion, nowIso } from '../storage/ids.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { deleteUserRow, insertUser, updateUserRow } from '../storage/users.js';
import { listReadable } from '../resources/lists.js';
import { users } from '../resources/users.js';
import { pageBody, pageRequest } from './pages.js';
import { changedMeanwhile } from './changed-meanwhile.js';
import type { Handler } from './types.js';

export const listUsers: Handler<'listUsers'> = async ({ query }, { principal, deps }) => {
  const page = await listReadable(deps, principal, users, query, pageRequest(query));
  return { status: 200, body: pageBody(page.rows.map(users.viewOf), page, query.limit ?? 20) };
};

export const getUser: Handler<'getUser'> = (_input, { resource }) => ({ status: 200, body: users.viewOf(resource!) });

export const createUser: Handler<'createUser'> = async ({ body }, { deps }) => {
  const user = { id: newId(), email: body.email, name: body.name, role: body.role, active: body.active ?? true, passwordHash: await hashPassword(body.password) };
  const created = await insertUser(deps.db, user, nowIso()).catch((error: unknown) => {
    throw isUniqueViolation(error) ? new ApiError('CONFLICT', 'A user with this email already exists.') : error;
  });
  return { status: 201, body: created, headers: { location: `/v1/users/${created.id}` } };
};

export const replaceUser: Handler<'replaceUser'> = async ({ body }, { resource, deps }) => {
  const current = users.viewOf(resource!);
  const next = { email: body.email, name: body.name, role: body.role, active: body.active };
  // The fields the caller's role may not change (role, status, email, password for a member) were refused
  // before the handler, by the pipeline's check-protected-fields stage (REST and GraphQL alike).
  const updatedAt = nextVersion(current.updatedAt);
  const changes = { ...next, updatedAt, ...(body.password ? { passwordHash: await hashPassword(body.password) } : {}) };
  try {
    await deps.db.transaction().execute(async (trx) => {
      if (!(await updateUserRow(trx, current.id, current.updatedAt, changes))) throw changedMeanwhile();
      // Deactivation ends the tokens the user holds, as deletion does: reactivating the account (say, after
      // a compromise) must not bring them back. A new password (a reset) ends them too.
      if ((current.active && !next.active) || body.password) {
        await revokeUserTokens(trx, current.id, updatedAt);
      } else if (next.active !== current.active || next.role !== current.role) {
        // Every server re-reads the user's status and role.
        await recordInvalidation(trx, 'user', current.id);
      }
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError('CONFLICT', 'A user with this email already exists.');
    throw error;
  }
  if (next.active !== current.active || next.role !== current.role || body.password) deps.invalidateSubject(current.id);
  return { status: 200, body: { ...current, ...next, updatedAt } };
};

export const deleteUser: Handler<'deleteUser'> = async (_input, { resource, deps }) => {
  const { id } = users.viewOf(resource!);
  await deps.db.transaction().execute(async (trx) => {
    await revokeUserTokens(trx, id, nowIso());
    await deleteUserRow(trx, id);
  });
  deps.invalidateSubject(id);
  return { status: 204, body: undefined };
};
