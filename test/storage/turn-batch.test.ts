import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AccessTokenRow } from '../../src/oauth/tokens/access-token-records.js';
import { grantReadStore } from '../../src/storage/grant-store.js';
import { newId } from '../../src/storage/ids.js';
import type { RefreshTokenRow } from '../../src/storage/refresh-tokens.js';
import { BatchCommitError, StaleRegistrationError, TurnBatch } from '../../src/storage/turn-batch.js';
import type { TokenRow } from '../../src/storage/token-rows.js';
import { createClient } from '../oauth/fixtures.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

function accessRow(overrides: Partial<AccessTokenRow> = {}): TokenRow {
  return {
    table: 'accessTokens',
    row: {
      jti: newId(),
      tokenHash: null,
      format: 'jwt',
      clientId: 'client-a',
      clientRegistrationId: 'registration-a',
      subject: 'client-a',
      subjectType: 'client',
      scopes: 'read:posts',
      grantType: 'client_credentials',
      issuedAt: '2026-11-23T10:00:00.000Z',
      expiresAt: '2026-11-23T10:10:00.000Z',
      revokedAt: null,
      grantId: null,
      ...overrides,
    },
  };
}

function refreshRow(overrides: Partial<RefreshTokenRow> = {}): TokenRow {
  return {
    table: 'refreshTokens',
    row: {
      tokenHash: newId(),
      familyId: 'family-1',
      clientId: 'client-a',
      clientRegistrationId: 'registration-a',
      userId: 'user-1',
      scopes: 'offline_access read:posts',
      authTime: '2026-11-23T09:59:00.000Z',
      issuedAt: '2026-11-23T10:00:00.000Z',
      expiresAt: '2026-12-07T10:00:00.000Z',
      rotatedAt: null,
      revokedAt: null,
      ...overrides,
    },
  };
}

const jtiOf = (row: TokenRow) => (row.row as AccessTokenRow).jti;

describe.each(DATABASE_KINDS)('rows of one event-loop turn share one commit on %s', (kind) => {
  let t: TestDatabase;
  let batch: TurnBatch;

  beforeEach(async () => {
    t = await createTestDatabase(kind);
    batch = new TurnBatch(t.db);
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await t.drop();
  });

  const jtis = async () => (await t.db.kysely.selectFrom('accessTokens').select('jti').orderBy('jti').execute()).map((row) => row.jti);

  it('stores every column of both kinds of row as given, and resolves each write once its rows are committed', async () => {
    const access = accessRow({ tokenHash: 'digest', format: 'opaque', grantId: 'family-1', subject: 'user-1', subjectType: 'user' });
    const refresh = refreshRow({ rotatedAt: null, revokedAt: '2026-11-23T10:05:00.000Z' });
    await batch.write([access, refresh]);
    expect(await t.db.kysely.selectFrom('accessTokens').selectAll().execute()).toEqual([access.row]);
    expect(await t.db.kysely.selectFrom('refreshTokens').selectAll().execute()).toEqual([refresh.row]);
  });

  it('stores a guarded write only while its client registration is unchanged, and the rest of the turn regardless', async () => {
    const { client } = await createClient(t.db);
    const { client: other } = await createClient(t.db);
    const seen = { clientRegistrationId: client.id, updatedAt: client.updatedAt, revocations: 0 };
    // Unchanged: stored.
    const first = accessRow({ clientRegistrationId: client.id });
    await batch.write([first], seen);
    // Changed since the request read it (a secret rotated): refused, nothing stored; another client's
    // guarded write and an unguarded one in the same turn are stored.
    await t.db.kysely.updateTable('clients').set({ updatedAt: '2099-01-01T00:00:00.000Z' }).where('id', '=', client.id).execute();
    const stale = accessRow({ clientRegistrationId: client.id });
    const sibling = accessRow({ clientRegistrationId: other.id });
    const unguarded = accessRow();
    const results = await Promise.allSettled([
      batch.write([stale], seen),
      batch.write([sibling], { clientRegistrationId: other.id, updatedAt: other.updatedAt, revocations: 0 }),
      batch.write([unguarded]),
    ]);
    expect(results.map((result) => result.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
    expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(StaleRegistrationError);
    const stored = [first, sibling, unguarded].map((row) => (row.row as AccessTokenRow).jti).sort();
    expect(await jtis()).toEqual(stored);
    // A deleted registration refuses its writes too.
    await t.db.kysely.deleteFrom('clients').where('id', '=', other.id).execute();
    await expect(batch.write([accessRow({ clientRegistrationId: other.id })], { clientRegistrationId: other.id, updatedAt: other.updatedAt, revocations: 0 })).rejects.toBeInstanceOf(
      StaleRegistrationError,
    );
    expect(await jtis()).toEqual(stored);
  });

  it("refuses a guarded write once the client's tokens were revoked, its updatedAt unchanged", async () => {
    const { client } = await createClient(t.db);
    const seen = { clientRegistrationId: client.id, updatedAt: client.updatedAt, revocations: 0 };
    await t.db.kysely.updateTable('clients').set({ revocations: 1 }).where('id', '=', client.id).execute();
    await expect(batch.write([accessRow({ clientRegistrationId: client.id })], seen)).rejects.toBeInstanceOf(StaleRegistrationError);
    await expect(batch.write([], seen)).rejects.toBeInstanceOf(StaleRegistrationError);
    expect(await jtis()).toEqual([]);
    await batch.write([], { ...seen, revocations: 1 });
  });

  it('checks guards without rows (self-contained tokens) by reading the registrations, without a transaction', async () => {
    const { client } = await createClient(t.db);
    const { client: gone } = await createClient(t.db);
    await t.db.kysely.deleteFrom('clients').where('id', '=', gone.id).execute();
    const guard = (c: typeof client) => ({ clientRegistrationId: c.id, updatedAt: c.updatedAt, revocations: 0 });
    const transactions = vi.spyOn(t.db.kysely, 'transaction');
    const locks = t.db.sqlite ? vi.spyOn(t.db.sqlite, 'beginImmediate') : null;
    const results = await Promise.allSettled([batch.write([], guard(client)), batch.write([], guard(gone)), batch.write([], guard(client))]);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(StaleRegistrationError);
    expect(transactions).not.toHaveBeenCalled();
    if (locks) expect(locks).not.toHaveBeenCalled();
    expect(await jtis()).toEqual([]);
  });

  it('commits the writes of one turn in one transaction', async () => {
    const transactions = vi.spyOn(t.db.kysely, 'transaction');
    const locks = t.db.sqlite ? vi.spyOn(t.db.sqlite, 'beginImmediate') : null;
    const rows = [accessRow(), accessRow(), accessRow()];
    await Promise.all([batch.write([rows[0]!]), batch.write([rows[1]!, refreshRow()]), batch.write([rows[2]!])]);
    expect(await jtis()).toEqual(rows.map((row) => (row.row as AccessTokenRow).jti).sort());
    // PostgreSQL: one Kysely transaction for the three writes; SQLite: one BEGIN IMMEDIATE on the handle.
    if (kind === 'postgres') expect(transactions).toHaveBeenCalledTimes(1);
    else expect(transactions).not.toHaveBeenCalled();
    if (locks) expect(locks).toHaveBeenCalledTimes(1);
  });

  it('fails exactly the writes whose rows were in a failed commit, and stores none of their rows', async () => {
    const first = accessRow();
    const taken = (first.row as AccessTokenRow).jti;
    await batch.write([first]);
    // This turn: a row whose primary key is taken makes the whole commit fail, its innocent neighbour too.
    const neighbour = accessRow();
    const sameTurn = await Promise.allSettled([batch.write([neighbour]), batch.write([accessRow({ jti: taken })])]);
    // The next turn commits on its own.
    const later = accessRow();
    await batch.write([later]);
    expect(sameTurn.map((result) => result.status)).toEqual(['rejected', 'rejected']);
    for (const result of sameTurn) {
      const error = (result as PromiseRejectedResult).reason as BatchCommitError;
      expect(error).toBeInstanceOf(BatchCommitError);
      expect(error.code).toBe('PORTCULLIS_BATCH_COMMIT_FAILED');
      expect(error.cause).toBeInstanceOf(Error);
    }
    expect(await jtis()).toEqual([taken, (later.row as AccessTokenRow).jti].sort());
  });

  it('never commits inside another request\'s transaction: a rolled-back transaction open meanwhile keeps none of the rows', async () => {
    const row = accessRow();
    let written: Promise<void> | undefined;
    await expect(
      t.db.kysely.transaction().execute(async (trx) => {
        await trx.insertInto('invalidations').values({ kind: 'token', target: 'rolled-back', createdAt: '2026-11-23T10:00:00.000Z' }).execute();
        written = batch.write([row]);
        // Give the batch a turn to run while this transaction is open.
        await new Promise((resolve) => setImmediate(resolve));
        await sql`select 1`.execute(trx);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    await written;
    expect(await jtis()).toEqual([(row.row as AccessTokenRow).jti]);
    expect(await t.db.kysely.selectFrom('invalidations').select('target').where('target', '=', 'rolled-back').execute()).toEqual([]);
  });

  /**
   * Works (user grants) inside the batch, on SQLite each in a savepoint of the turn's commit: one work's
   * failure leaves the others' rows and the turn's plain rows alone, and no read outside the batch sees a
   * work's uncommitted rows.
   */
  describe('works', () => {
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
});
