import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors/registry.js';
import { KeyStore } from '../../src/oauth/keys/key-store.js';
import { TokenService } from '../../src/oauth/tokens/token-service.js';
import { authenticate } from '../../src/pipeline/authenticate.js';
import { SubjectDirectory } from '../../src/pipeline/subject-directory.js';
import type { Principal, TokenPrincipal } from '../../src/policy/principal.js';
import { createTestDatabase, type TestDatabase } from '../helpers/databases.js';
import { createClient, makeConfig } from '../oauth/fixtures.js';

/**
 * A hot token's requests share one principal, built once from the token and the statuses of its subject and
 * client; any change to either status (read again after `forget`, as the invalidation feed does) builds it
 * anew, so a shared principal never outlives what it was decided from.
 */
describe('a cached token decides one shared principal until a status it was built from changes', () => {
  let t: TestDatabase;
  let tokens: TokenService;

  beforeAll(async () => {
    t = await createTestDatabase('sqlite');
    const config = makeConfig();
    tokens = new TokenService({ db: t.db, config, keys: await KeyStore.open(t.db, config) });
  });
  afterAll(() => t.drop());

  async function principal(subjects: SubjectDirectory, token: string): Promise<Principal | string> {
    try {
      return await authenticate({ authorization: `Bearer ${token}`, tokenInQuery: false }, { tokens, subjects });
    } catch (error) {
      if (error instanceof ApiError) return String(error.headers?.['www-authenticate']);
      throw error;
    }
  }

  it('reuses the frozen principal, and builds a new one after a role change and a scope change', async () => {
    const subjects = new SubjectDirectory(t.db.kysely);
    const { client } = await createClient(t.db, { scopes: ['read:posts', 'write:posts'], role: 'member' });
    const { accessToken } = await tokens.issueAccessToken({
      client,
      subject: client.clientId,
      subjectType: 'client',
      scopes: ['read:posts', 'write:posts'],
      grantType: 'client_credentials',
    });
    const first = await principal(subjects, accessToken);
    expect(first).toMatchObject({ kind: 'client', role: 'member' });
    expect(Object.isFrozen(first)).toBe(true);
    expect(await principal(subjects, accessToken)).toBe(first);

    await t.db.kysely.updateTable('clients').set({ role: 'admin' }).where('id', '=', client.id).execute();
    subjects.forget(client.clientId);
    const promoted = await principal(subjects, accessToken);
    expect(promoted).not.toBe(first);
    expect(promoted).toMatchObject({ kind: 'client', role: 'admin' });
    expect(await principal(subjects, accessToken)).toBe(promoted);

    await t.db.kysely.updateTable('clients').set({ scopes: JSON.stringify(['read:posts']) }).where('id', '=', client.id).execute();
    subjects.forget(client.clientId);
    const narrowed = (await principal(subjects, accessToken)) as TokenPrincipal;
    expect([...narrowed.scopes]).toEqual(['read:posts']);

    await t.db.kysely.deleteFrom('clients').where('id', '=', client.id).execute();
    subjects.forget(client.clientId);
    expect(await principal(subjects, accessToken)).toContain('error_description="The token subject is no longer active"');
  });
});
