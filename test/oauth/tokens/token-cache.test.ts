import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Config } from '../../../src/config/config.js';
import { KeyStore } from '../../../src/oauth/keys/key-store.js';
import { TokenService } from '../../../src/oauth/tokens/token-service.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { createClient, makeConfig, type TestClient } from '../fixtures.js';

describe.each(DATABASE_KINDS)('verified-token cache in the token service on %s', (kind) => {
  let t: TestDatabase;
  let config: Config;
  let keys: KeyStore;
  let client: TestClient;
  let now: number;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    config = makeConfig();
    keys = await KeyStore.open(t.db, config);
    client = await createClient(t.db);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(() => t.drop());

  function service(): TokenService {
    now = Date.now();
    return new TokenService({ db: t.db, config, keys, clock: () => now });
  }

  function issueFor(tokens: TokenService, subject: string, subjectType: 'user' | 'client' = 'user') {
    return tokens.issueAccessToken({ client: client.client, subject, subjectType, scopes: ['read:posts'], grantType: 'authorization_code' });
  }

  it('serves a hot token without a database read or a key lookup', async () => {
    const tokens = service();
    const { accessToken } = await issueFor(tokens, 'user-1');
    const first = await tokens.verifyAccessToken(accessToken);
    const reads = vi.spyOn(t.db.kysely, 'selectFrom');
    const keyLookups = vi.spyOn(keys, 'verificationKey');
    for (let i = 0; i < 50; i++) expect(await tokens.verifyAccessToken(accessToken)).toBe(first);
    expect(reads).not.toHaveBeenCalled();
    expect(keyLookups).not.toHaveBeenCalled();
  });

  it('reads the row once for concurrent first uses of a token', async () => {
    const tokens = service();
    const { accessToken } = await issueFor(tokens, 'user-2');
    const reads = vi.spyOn(t.db.kysely, 'selectFrom');
    const results = await Promise.all(Array.from({ length: 20 }, () => tokens.verifyAccessToken(accessToken)));
    expect(new Set(results).size).toBe(1);
    expect(reads).toHaveBeenCalledTimes(1);
  });

  it('revokeToken takes effect immediately for a cached token', async () => {
    const tokens = service();
    const { accessToken } = await issueFor(tokens, 'user-3');
    await tokens.revokeToken(await tokens.verifyAccessToken(accessToken));
    await expect(tokens.verifyAccessToken(accessToken)).rejects.toMatchObject({ name: 'InvalidTokenError', reason: 'revoked' });
  });

  it('evictSubject drops a deactivated user’s cached tokens, and only theirs', async () => {
    const tokens = service();
    const alice = await issueFor(tokens, 'alice');
    const bob = await issueFor(tokens, 'bob');
    // A client whose client_id is the same string as the user's id.
    const aliceClient = await createClient(t.db, { clientId: 'alice' });
    const aliceAsClient = await tokens.issueAccessToken({ client: aliceClient.client, subject: 'alice', subjectType: 'client', scopes: ['read:posts'], grantType: 'client_credentials' });
    for (const issued of [alice, bob, aliceAsClient]) await tokens.verifyAccessToken(issued.accessToken);
    expect(tokens.evictSubject('alice')).toBe(1);
    const reads = vi.spyOn(t.db.kysely, 'selectFrom');
    await tokens.verifyAccessToken(bob.accessToken);
    await tokens.verifyAccessToken(aliceAsClient.accessToken);
    expect(reads).not.toHaveBeenCalled();
    await tokens.verifyAccessToken(alice.accessToken);
    expect(reads).toHaveBeenCalledTimes(1);
  });

  it('evictWhere selects cached tokens by any property', async () => {
    const tokens = service();
    const { accessToken } = await issueFor(tokens, 'carol');
    await tokens.verifyAccessToken(accessToken);
    expect(tokens.evictWhere((token) => token.clientId === client.client.clientId)).toBeGreaterThanOrEqual(1);
    const reads = vi.spyOn(t.db.kysely, 'selectFrom');
    await tokens.verifyAccessToken(accessToken);
    expect(reads).toHaveBeenCalledTimes(1);
  });

  it('does not cache a verification that raced with a revocation', async () => {
    const tokens = service();
    const { accessToken, jti } = await issueFor(tokens, 'dave');
    // Another instance revokes the token and announces it while our read is in flight: the read still
    // sees the row as it was, so its result must not be cached.
    const selectFrom = t.db.kysely.selectFrom.bind(t.db.kysely);
    vi.spyOn(t.db.kysely, 'selectFrom').mockImplementationOnce(((table: 'accessTokens') => {
      tokens.evictJti(jti);
      return selectFrom(table);
    }) as never);
    await expect(tokens.verifyAccessToken(accessToken)).resolves.toMatchObject({ jti });
    await t.db.kysely.updateTable('accessTokens').set({ revokedAt: new Date().toISOString() }).where('jti', '=', jti).execute();
    await expect(tokens.verifyAccessToken(accessToken)).rejects.toMatchObject({ reason: 'revoked' });
  });

  it('drops a cached token at its expiry', async () => {
    const tokens = service();
    const { accessToken } = await issueFor(tokens, 'erin');
    await tokens.verifyAccessToken(accessToken);
    now += (600 + config.tokens.clockSkew) * 1000;
    await expect(tokens.verifyAccessToken(accessToken)).rejects.toMatchObject({ reason: 'expired (exp)' });
  });
});
