import type { Kysely } from 'kysely';
import { hashPassword } from '../oauth/passwords.js';
import { generateSecret } from '../oauth/secrets.js';
import { newId, nextVersion, nowIso } from '../storage/ids.js';
import { lockUser } from '../storage/row-locks.js';
import type { Database } from '../storage/schema.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { findUserRowByEmail, insertUser, toUserRecord, type Role, type UserRecord } from '../storage/users.js';
import { EXIT_OK } from './cli-errors.js';
import { JSON_OPTION, type Command, type CommandGroup } from './command.js';
import { checkContractInput } from './contract-input.js';
import { parsePositiveInteger } from './option-values.js';
import { formatCount, writeJson, writeLine, writeTable } from './output.js';
import { revokeUserTokens } from '../oauth/tokens/access-token-records.js';

/** Contract field -> the option that sets it, for error messages. */
const USER_OPTIONS = { email: 'email', name: 'name', role: 'role', password: 'password', active: 'active' } as const;

interface UserCreateBody {
  email: string;
  name: string;
  role: Role;
  active: boolean;
  password: string;
}

const createUserCommand: Command = {
  name: 'create',
  summary: 'Create a user; without --password one is generated and printed once',
  options: {
    email: { type: 'string', value: 'EMAIL', required: true, description: 'unique email address' },
    name: { type: 'string', value: 'NAME', required: true, description: 'display name' },
    role: { type: 'string', value: 'ROLE', required: true, description: 'admin, editor or member' },
    password: {
      type: 'string',
      value: 'PASSWORD',
      description: 'initial password, at least 12 characters (a command-line argument is visible to other local users; omit it to generate one)',
    },
    json: JSON_OPTION,
  },
  async run({ options }, { db }) {
    const supplied = typeof options.password === 'string' ? options.password : null;
    // 256 random bits as base64url: 43 characters, well over the contract's 12-character minimum.
    const password = supplied ?? generateSecret();
    const body = checkContractInput<UserCreateBody>(
      'createUser',
      'body',
      { email: options.email, name: options.name, role: options.role, password },
      USER_OPTIONS,
    );
    let user: UserRecord;
    try {
      const passwordHash = await hashPassword(password);
      user = await insertUser(db.kysely, { id: newId(), email: body.email, name: body.name, role: body.role, active: body.active, passwordHash }, nowIso());
    } catch (error) {
      if (isUniqueViolation(error)) throw new Error(`a user with email ${body.email} already exists`);
      throw error;
    }
    const generated = supplied === null ? password : null;
    if (options.json) {
      writeJson(generated === null ? { user } : { user, password: generated });
      return EXIT_OK;
    }
    writeLine(`created user ${user.id} <${user.email}> (${user.role})`);
    if (generated !== null) writeLine(`password: ${generated}\n(shown once: only its hash is stored)`);
    return EXIT_OK;
  },
};

const listUsersCommand: Command = {
  name: 'list',
  summary: 'List users, oldest first',
  options: {
    role: { type: 'string', value: 'ROLE', description: 'only this role' },
    active: { type: 'string', value: 'true|false', description: 'only active or only deactivated users' },
    limit: { type: 'string', value: 'N', description: 'at most N users' },
    json: JSON_OPTION,
  },
  async run({ options }, { db }) {
    // The same filters, with the same value rules, as GET /v1/users.
    const filters = checkContractInput<{ role?: Role; active?: boolean }>(
      'listUsers',
      'querystring',
      { ...(options.role !== undefined ? { role: options.role } : {}), ...(options.active !== undefined ? { active: options.active } : {}) },
      USER_OPTIONS,
    );
    const limit = options.limit === undefined ? null : parsePositiveInteger('limit', options.limit);
    let query = db.kysely.selectFrom('users').selectAll().orderBy('id');
    if (filters.role !== undefined) query = query.where('role', '=', filters.role);
    if (filters.active !== undefined) query = query.where('active', '=', filters.active);
    if (limit !== null) query = query.limit(limit);
    const users = (await query.execute()).map(toUserRecord);
    if (options.json) {
      writeJson(users);
      return EXIT_OK;
    }
    writeTable(
      users.map((u) => ({ id: u.id, email: u.email, name: u.name, role: u.role, active: String(u.active), created: u.createdAt })),
      ['id', 'email', 'name', 'role', 'active', 'created'],
    );
    return EXIT_OK;
  },
};

async function findUser(db: Kysely<Database>, idOrEmail: string): Promise<UserRecord | null> {
  // Ids are hex and never contain '@', so the argument says which column it names.
  const row = idOrEmail.includes('@')
    ? await findUserRowByEmail(db, idOrEmail)
    : await db.selectFrom('users').selectAll().where('id', '=', idOrEmail).executeTakeFirst();
  return row ? toUserRecord(row) : null;
}

const deactivateUserCommand: Command = {
  name: 'deactivate',
  summary: "Deactivate a user and revoke the user's access tokens",
  positionals: ['<id|email>'],
  options: { json: JSON_OPTION },
  async run({ options, positionals }, { db }) {
    const user = await findUser(db.kysely, positionals[0]!);
    if (!user) throw new Error(`no user ${positionals[0]}`);
    const now = nowIso();
    // As PUT /v1/users/{id} does on deactivation: the flag and the revocation commit together, so no
    // token outlives the account being switched off. Servers re-read subject status within seconds. The
    // user is read again under its lock, and the change leaves a new version (never the one a concurrent
    // PUT read, which must then find the user changed rather than switch it back on).
    const { revoked, version } = await db.kysely.transaction().execute(async (trx) => {
      const locked = await lockUser(trx, user.id);
      if (!locked) throw new Error(`no user ${positionals[0]}`);
      const deactivated = locked.active ? nextVersion(locked.updatedAt) : null;
      if (deactivated !== null) await trx.updateTable('users').set({ active: false, updatedAt: deactivated }).where('id', '=', user.id).execute();
      return { revoked: await revokeUserTokens(trx, user.id, now), version: deactivated };
    });
    if (options.json) {
      writeJson({ user: version !== null ? { ...user, active: false, updatedAt: version } : { ...user, active: false }, revokedTokens: revoked });
      return EXIT_OK;
    }
    writeLine(`${version !== null ? 'deactivated' : 'already inactive:'} user ${user.id} <${user.email}>; revoked ${formatCount(revoked, 'access token')}`);
    return EXIT_OK;
  },
};

export const usersGroup: CommandGroup = {
  name: 'users',
  summary: 'Manage user accounts.',
  commands: [createUserCommand, listUsersCommand, deactivateUserCommand],
};
