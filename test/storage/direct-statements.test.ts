import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeTransaction } from '../../src/storage/write-transaction.js';
import { AuditLog } from '../../src/audit/audit-log.js';
import { sampleDecision, SILENT_LOGGER } from '../helpers/audit.js';
import { startTestApp, type TestApp } from '../helpers/app.js';

/**
 * On SQLite the hot statements (a resource by id, audit appends) bypass Kysely, on the connection Kysely
 * also uses. They must never run inside a Kysely transaction that another request has open.
 */
describe('direct SQLite statements beside Kysely transactions', () => {
  let t: TestApp;
  beforeEach(async () => {
    t = await startTestApp('sqlite');
  });
  afterEach(async () => {
    await t.close();
  });

  const pause = () => new Promise((resolve) => setTimeout(resolve, 50));

  it('never serves a resource as another request\'s open transaction has changed it', async () => {
    const alice = await t.createUser('member');
    const token = await alice.token(['read:posts', 'write:posts']);
    const created = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'committed', body: 'text', status: 'published' } });
    const id = created.json().id as string;
    // Token, user and client are cached now: the read below waits for nothing but the resource.
    expect((await t.request({ url: `/v1/posts/${id}`, token })).json().title).toBe('committed');

    let during: ReturnType<TestApp['request']> | undefined;
    await expect(
      t.app.db.kysely.transaction().execute(async (trx) => {
        await trx.updateTable('posts').set({ title: 'never committed' }).where('id', '=', id).execute();
        during = t.request({ url: `/v1/posts/${id}`, token });
        await pause();
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');

    const response = await during!;
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({ ...created.json(), title: 'committed' });
  });

  it('appends audit events after, not inside, a transaction that rolls back', async () => {
    const log = new AuditLog(t.app.db, SILENT_LOGGER, { maxBatch: 100, flushMs: 1000 });
    const before = await t.app.db.kysely.selectFrom('auditEvents').select('id').execute();
    let flushed: Promise<void> | undefined;
    await expect(
      t.app.db.kysely.transaction().execute(async (trx) => {
        await trx.updateTable('users').set({ name: 'never committed' }).execute();
        log.record(sampleDecision(1));
        flushed = log.flush();
        await pause();
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    await flushed;

    const rows = await t.app.db.kysely.selectFrom('auditEvents').select(['id', 'requestId']).orderBy('seq').execute();
    expect(rows.length).toBe(before.length + 1);
    expect(rows.at(-1)!.requestId).toBe('req-1');
  });

  it('rolls back a write transaction whose COMMIT fails, so the shared connection takes the next one', async () => {
    const db = t.app.db.kysely;
    // Foreign keys checked at COMMIT: a comment on no post makes the COMMIT itself fail.
    await expect(
      writeTransaction(db, async (trx) => {
        await sql`pragma defer_foreign_keys = on`.execute(trx);
        await trx.insertInto('comments').values({ id: 'orphan', postId: 'no-such-post', authorId: 'nobody', body: 'x', createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z' }).execute();
      }),
    ).rejects.toThrow(/FOREIGN KEY constraint failed/);
    expect(t.app.db.sqlite!.inTransaction).toBe(false);
    await writeTransaction(db, async (trx) => {
      await trx.updateTable('users').set({ name: 'committed' }).where('id', '=', 'nobody').execute();
    });
    expect(await db.selectFrom('comments').select('id').where('id', '=', 'orphan').execute()).toEqual([]);
  });
});
