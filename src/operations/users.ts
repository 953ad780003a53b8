import { ApiError } from '../errors/registry.js';
import { hashPassword } from '../oauth/passwords.js';
import { revokeUserTokens } from '../oauth/tokens/access-token-records.js';
import { recordInvalidation } from '../storage/invalidations.js';
import { forbiddenFieldChanges } from '../policy/protected-fields.js';
import { newId, nowIso } from '../storage/ids.js';
import { whereEqual } from '../storage/filter-sql.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { listReadable, pageBody, pageRequest } from './resources.js';
import type { Handler } from './types.js';
import { viewOf, viewsOf, type UserView } from './views.js';

export const listUsers: Handler<'listUsers'> = async ({ query }, { principal, deps }) => {
  const page = await listReadable(
    deps,
    principal,
    'user',
    whereEqual({ role: query.role, active: query.active }),
    pageRequest(query),
  );
  return { status: 200, body: pageBody(viewsOf('user', page.rows), page, query.limit ?? 20) };
};

export const getUser: Handler<'getUser'> = async (_input, { resource }) => ({ status: 200, body: viewOf('user', resource!) });

export const createUser: Handler<'createUser'> = async ({ body }, { deps }) => {
  const now = nowIso();
  const user: UserView = { id: newId(), email: body.email, name: body.name, role: body.role, active: body.active ?? true, createdAt: now, updatedAt: now };
  try {
    await deps.db.insertInto('users').values({ ...user, passwordHash: await hashPassword(body.password) }).execute();
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError('CONFLICT', 'A user with this email already exists.');
    throw error;
  }
  return { status: 201, body: user, headers: { location: `/v1/users/${user.id}` } };
};

export const replaceUser: Handler<'replaceUser'> = async ({ body }, { principal, resource, deps }) => {
  const current = viewOf('user', resource!);
  const next = { email: body.email, name: body.name, role: body.role, active: body.active };
  // Property-level authorization (OWASP API3): a member may edit their profile, not their role, status or
  // password.
  const refused = forbiddenFieldChanges(deps.policy, 'user', principal, current, { ...next, ...(body.password ? { password: body.password } : {}) });
  if (refused.length > 0) throw new ApiError('FORBIDDEN', `Your role may not change ${refused.join(', ')}.`);
  const updatedAt = nowIso();
  const changes = { ...next, updatedAt, ...(body.password ? { passwordHash: await hashPassword(body.password) } : {}) };
  try {
    await deps.db.transaction().execute(async (trx) => {
      await trx.updateTable('users').set(changes).where('id', '=', current.id).execute();
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
  const id = String(resource!.id);
  await deps.db.transaction().execute(async (trx) => {
    await revokeUserTokens(trx, id, nowIso());
    await trx.deleteFrom('users').where('id', '=', id).execute();
  });
  deps.invalidateSubject(id);
  return { status: 204, body: undefined };
};
