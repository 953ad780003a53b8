import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors/registry.js';
import { KeyStore } from '../../src/oauth/keys/key-store.js';
import { TokenService } from '../../src/oauth/tokens/token-service.js';
import { authenticate } from '../../src/pipeline/authenticate.js';
import { SubjectDirectory } from '../../src/pipeline/subject-directory.js';
import type { Principal } from '../../src/policy/principal.js';
import type { ClientRecord } from '../../src/storage/clients.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';
import { createClient, makeConfig } from '../oauth/fixtures.js';

/**
 * The statuses a process holds may be older than a token the token endpoint (of this process or another)
 * has just issued: a client_id registered again, a token issued under a newer revocation count. Such a
 * token makes authentication read the client again, once; a token older than the status proves nothing.
 * Here nothing tells the directory of the changes (no invalidation feed runs).
 */
describe.each(DATABASE_KINDS)('authentication reads a client again for a token newer than what it holds, on %s', (kind) => {
  let t: TestDatabase;
  let tokens: TokenService;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    const config = makeConfig();
    tokens = new TokenService({ db: t.db, config, keys: await KeyStore.open(t.db, config) });
  });
  afterAll(() => t.drop());

  const issue = (client: ClientRecord) =>
    tokens.issueAccessToken({ client, subject: client.clientId, subjectType: 'client', scopes: ['read:posts'], grantType: 'client_credentials' });

  async function outcome(subjects: SubjectDirectory, token: string): Promise<Principal | string> {
    try {
      return await authenticate({ authorization: `Bearer ${token}`, tokenInQuery: false }, { tokens, subjects });
    } catch (error) {
      if (error instanceof ApiError) return String(error.headers?.['www-authenticate']);
      throw error;
    }
  }

  it('accepts a token of a client_id registered again while the old registration (or its absence) is held', async () => {
    const subjects = new SubjectDirectory(t.db.kysely);
    const first = await createClient(t.db, { clientId: 'registered-again' });
    const old = await issue(first.client);
    expect(await outcome(subjects, old.accessToken)).toMatchObject({ kind: 'client', id: first.client.id });
    await t.db.kysely.deleteFrom('clients').where('id', '=', first.client.id).execute();
    const second = await createClient(t.db, { clientId: 'registered-again' });
    // Held: the first registration. The new registration's token is accepted; the old one is not.
    const fresh = await issue(second.client);
    expect(await outcome(subjects, fresh.accessToken)).toMatchObject({ kind: 'client', id: second.client.id, subject: 'registered-again' });
    expect(await outcome(subjects, old.accessToken)).toContain('error_description="The client of the token is no longer registered"');
    expect(await outcome(subjects, fresh.accessToken)).toMatchObject({ kind: 'client', id: second.client.id });
  });

  it('accepts a token issued under a newer revocation count than the one held, and still refuses the older tokens', async () => {
    const subjects = new SubjectDirectory(t.db.kysely);
    const { client } = await createClient(t.db);
    const before = await issue(client);
    expect(await outcome(subjects, before.accessToken)).toMatchObject({ kind: 'client' });
    await t.db.kysely.updateTable('clients').set({ revocations: 1 }).where('id', '=', client.id).execute();
    const after = await issue({ ...client, revocations: 1 });
    expect(await outcome(subjects, after.accessToken)).toMatchObject({ kind: 'client', id: client.id });
    expect(await outcome(subjects, before.accessToken)).toContain('error_description="The access token was revoked"');
  });
});
