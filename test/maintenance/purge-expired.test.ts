import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { purgeExpired } from '../../src/maintenance/purge-expired.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

const NOW = Date.parse('2026-11-22T12:00:00.000Z');
const iso = (offsetMs: number) => new Date(NOW + offsetMs).toISOString();
const HOUR = 3600 * 1000;

describe.each(DATABASE_KINDS)('purging expired rows on %s', (kind) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(kind);
  });
  afterEach(async () => {
    await t.drop();
  });

  function token(jti: string, expiresAt: string) {
    return { jti, tokenHash: null, format: 'jwt', clientId: 'c', subject: 's', subjectType: 'user', scopes: 'read:posts', grantType: 'client_credentials', issuedAt: iso(-48 * HOUR), expiresAt, revokedAt: null };
  }

  function key(name: string, expiresAt: string) {
    return { scope: 'c s', key: name, requestHash: 'h', status: 201, location: null, body: null, createdAt: iso(-30 * HOUR), expiresAt };
  }

  it('removes access tokens and revocations of self-contained ones a day past expiry, and expired idempotency keys, nothing else', async () => {
    await t.db.kysely
      .insertInto('accessTokens')
      .values([token('long-expired', iso(-25 * HOUR)), token('recently-expired', iso(-23 * HOUR)), token('valid', iso(HOUR))])
      .execute();
    await t.db.kysely
      .insertInto('revokedAccessTokens')
      .values([{ jti: 'revoked-long-expired', expiresAt: iso(-25 * HOUR) }, { jti: 'revoked-recently-expired', expiresAt: iso(-23 * HOUR) }, { jti: 'revoked-valid', expiresAt: iso(HOUR) }])
      .execute();
    await t.db.kysely.insertInto('idempotencyKeys').values([key('expired', iso(-1)), key('live', iso(HOUR))]).execute();

    await purgeExpired(t.db, NOW);

    const tokens = await t.db.kysely.selectFrom('accessTokens').select('jti').orderBy('jti').execute();
    expect(tokens.map((r) => r.jti)).toEqual(['recently-expired', 'valid']);
    const revoked = await t.db.kysely.selectFrom('revokedAccessTokens').select('jti').orderBy('jti').execute();
    expect(revoked.map((r) => r.jti)).toEqual(['revoked-recently-expired', 'revoked-valid']);
    const keys = await t.db.kysely.selectFrom('idempotencyKeys').select('key').orderBy('key').execute();
    expect(keys.map((r) => r.key)).toEqual(['live']);
  });
});
