/**
 * Works (user grants) inside the turn batch, on SQLite each in a savepoint of the turn's commit: one work's
 * failure leaves the others' rows and the turn's plain rows alone, and no read outside the batch sees a
 * work's uncommitted rows.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AccessTokenRow } from '../../src/oauth/tokens/access-token-records.js';
import { grantReadStore } from '../../src/storage/grant-store.js';
import { newId } from '../../src/storage/ids.js';
import type { RefreshTokenRow } from '../../src/storage/refresh-tokens.js';
import type { TokenRow } from '../../src/storage/token-rows.js';
import { TurnBatch } from '../../src/storage/turn-batch.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

function accessRow(overrides: Partial<AccessTokenRow> = {}): TokenRow {
  return {
    table: 'accessTokens',
    row: {
      jti: newId(), tokenHash: null, format: 'jwt', clientId: 'client-a', clientRegistrationId: 'registration-a', subject: 'user-1', subjectType: 'user',
      scopes: 'read:posts', grantType: 'refresh_token', issuedAt: '2026-11-23T10:00:00.000Z', expiresAt: '2099-11-23T10:10:00.000Z', revokedAt: null, grantId: 'family-1',
      ...overrides,
    },
  };
}

function refreshRow(overrides: Partial<RefreshTokenRow> = {}): TokenRow {
  return {
    table: 'refreshTokens',
    row: {
      tokenHash: newId(), familyId: 'family-1', clientId: 'client-a', clientRegistrationId: 'registration-a', userId: 'user-1', scopes: 'offline_access read:posts',
      authTime: '2026-11-23T09:59:00.000Z', issuedAt: '2026-11-23T10:00:00.000Z', expiresAt: '2099-12-07T10:00:00.000Z', rotatedAt: null, revokedAt: null,
      ...overrides,
    },
  };
}

const jtiOf = (row: TokenRow) => (row.row as AccessTokenRow).jti;

describe.each(DATABASE_KINDS)('works in the turn batch on %s', (kind) => {
  let t: TestDatabase;
  let batch: TurnBatch;

  beforeEach(async () => {
    t = await createTestDatabase(kind);
    batch = new TurnBatch(t.db);
  });
  afterEach(async () => {
    await t.drop();
  });

  const jtis = async () => (await t.db.kysely.selectFrom('accessTokens').select('jti').orderBy('jti').execute()).map((row) => row.jti);

  it('a work that throws (plain error, SQLite constraint error) leaves the other works and rows of its turn committed, and nothing of its own', async () => {
    const taken = accessRow();
    await batch.write([taken]);
    const [plain, w1, w2, w3, w4] = [accessRow(), accessRow(), accessRow(), accessRow(), accessRow()];
    const settled = await Promise.allSettled([
      batch.write([plain]),
      batch.transact(async (store) => {
        await store.insertRows([w1]);
        return 'one';
      }),
      batch.transact(async (store) => {
        await store.insertRows([w2]);
        throw new Error('refused after writing');
      }),
      batch.transact(async (store) => {
        await store.insertRows([w3]);
        // The primary key is taken: SQLITE_CONSTRAINT / unique violation inside the work.
        await store.insertRows([accessRow({ jti: jtiOf(taken) })]);
        return 'three';
      }),
      batch.transact(async (store) => {
        await store.insertRows([w4]);
        return 'four';
      }),
    ]);
    expect(settled.map((result) => result.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect(await jtis()).toEqual([taken, plain, w1, w4].map(jtiOf).sort());
  });

  it('a read of a refresh token outside the batch never sees the row a work has written and then rolled back', async () => {
    if (kind !== 'sqlite') return;
    const row = refreshRow();
    const hash = (row.row as RefreshTokenRow).tokenHash;
    let inside!: () => void;
    const reachedInside = new Promise<void>((resolve) => (inside = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const work = batch.transact(async (store) => {
      await store.insertRows([row]);
      inside();
      await released;
      throw new Error('roll back');
    });
    await reachedInside;
    const seen = grantReadStore(t.db).findRefreshToken(hash);
    release();
    await expect(work).rejects.toThrow('roll back');
    expect(await seen).toBeNull();
  });
});
