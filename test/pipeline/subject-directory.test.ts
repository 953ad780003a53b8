import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SubjectDirectory } from '../../src/pipeline/subject-directory.js';
import { insertClient } from '../../src/storage/clients.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { insertUser } from '../../src/storage/users.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

describe.each(DATABASE_KINDS)('subject directory on %s', (kind) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(kind);
  });
  afterEach(async () => {
    await t.drop();
  });

  it('sees a change made by another process within its time to live, and no later read before then', async () => {
    let now = 1_000_000;
    const directory = new SubjectDirectory(t.db.kysely, { ttlMs: 5000, clock: () => now });
    const id = newId();
    await insertUser(t.db.kysely, { id, email: `${id}@example.com`, name: 'U', role: 'member', active: true, passwordHash: 'x' }, nowIso());
    expect(await directory.lookup('user', id)).toEqual({ id, role: 'member', active: true, scopes: null, revocations: null, rateLimit: null });
    // Another process (the CLI, another instance) deactivates the user: no forget() reaches this one.
    await t.db.kysely.updateTable('users').set({ active: false }).where('id', '=', id).execute();
    now += 4999;
    expect(await directory.lookup('user', id)).toEqual({ id, role: 'member', active: true, scopes: null, revocations: null, rateLimit: null });
    now += 2;
    expect(await directory.lookup('user', id)).toEqual({ id, role: 'member', active: false, scopes: null, revocations: null, rateLimit: null });
  });

  it('forgets at once what this process changed', async () => {
    const directory = new SubjectDirectory(t.db.kysely);
    const id = newId();
    await insertUser(t.db.kysely, { id, email: `${id}@example.com`, name: 'U', role: 'member', active: true, passwordHash: 'x' }, nowIso());
    await directory.lookup('user', id);
    await t.db.kysely.updateTable('users').set({ role: 'editor' }).where('id', '=', id).execute();
    directory.forget(id);
    expect(await directory.lookup('user', id)).toEqual({ id, role: 'editor', active: true, scopes: null, revocations: null, rateLimit: null });
  });

  it('finds a client without a role (it acts only for users) with role null', async () => {
    const directory = new SubjectDirectory(t.db.kysely);
    const id = newId();
    await insertClient(
      t.db.kysely,
      {
        id, clientId: 'web-app', name: 'Web app', type: 'public', secretHash: null, redirectUris: ['https://app.example.com/cb'], grantTypes: ['authorization_code'],
        scopes: ['openid', 'read:posts'], role: null, accessTokenFormat: 'jwt', accessTokenTtl: 600, rateLimit: null, firstParty: false, legacy: false,
        postLogoutRedirectUris: [], idTokenSignedResponseAlg: 'RS256',
      },
      nowIso(),
    );
    expect(await directory.lookup('client', 'web-app')).toEqual({ id, role: null, active: true, scopes: new Set(['openid', 'read:posts']), revocations: 0, rateLimit: null });
  });

  it('answers from its cache only while an entry is fresh, and never across kinds', async () => {
    let now = 1_000_000;
    const directory = new SubjectDirectory(t.db.kysely, { ttlMs: 5000, clock: () => now });
    const id = newId();
    await insertUser(t.db.kysely, { id, email: `${id}@example.com`, name: 'U', role: 'member', active: true, passwordHash: 'x' }, nowIso());
    expect(directory.cached('user', id)).toBeUndefined();
    await directory.lookup('user', id);
    expect(directory.cached('user', id)).toEqual({ id, role: 'member', active: true, scopes: null, revocations: null, rateLimit: null });
    // A client whose client_id equals this user id is another subject: not cached, and not found.
    expect(directory.cached('client', id)).toBeUndefined();
    expect(await directory.lookup('client', id)).toBeNull();
    expect(directory.cached('client', id)).toBeNull();
    now += 5001;
    expect(directory.cached('user', id)).toBeUndefined();
    await directory.lookup('user', id);
    directory.forget(id);
    expect(directory.cached('user', id)).toBeUndefined();
  });
});
