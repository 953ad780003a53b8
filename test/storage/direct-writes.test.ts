import SQLite from 'better-sqlite3';
import { sql, type Kysely } from 'kysely';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, sqliteFileIn, type Db } from '../../src/storage/dialect.js';
import { isoTime, newId } from '../../src/storage/ids.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { insertRow, updateRow } from '../../src/storage/resource-rows.js';
import { insertUser } from '../../src/storage/users.js';
import { posts } from '../../src/resources/posts.js';

/**
 * On SQLite a resource's row is inserted and updated with the SQL Kysely compiles for the write's shape, run
 * as a prepared statement: what is stored must be what Kysely would have stored, and the write must take
 * the write lock as every other write does.
 */
describe('insertRow and updateRow on SQLite', () => {
  let dataDir: string;
  let db: Db;
  const authorId = newId();
  const now = isoTime(Date.now());
  const post = (title: unknown) => ({ id: newId(), authorId, title, body: 'text', status: 'draft', createdAt: now, updatedAt: now });

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-direct-insert-'));
    db = await openDb({ databaseUrl: null, dataDir, backgroundCheckpoints: false });
    await migrateToLatest(db);
    await insertUser(db.kysely, { id: authorId, email: 'author@example.com', name: 'Author', role: 'member', active: true, passwordHash: 'unused' }, now);
    db.sqlite!.prepare("create table direct_types (id text primary key, flag integer not null, note text, absent text not null default 'default')").run();
  });

  afterAll(async () => {
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const storedPost = (id: string) => db.kysely.selectFrom('posts').selectAll().where('id', '=', id).executeTakeFirst();

  it('stores what Kysely stores, booleans as 0 and 1 and nulls as nulls', async () => {
    const direct = post('direct');
    await insertRow(db.kysely, db.sqlite, posts.table, direct);
    const viaKysely = post('direct');
    await db.kysely.insertInto('posts').values(viaKysely as never).execute();
    expect(await storedPost(direct.id)).toEqual({ ...(await storedPost(viaKysely.id)), id: direct.id });
    expect(await storedPost(direct.id)).toMatchObject(direct);

    // Booleans, a null and an absent field (which takes the column's default), in a table with such columns.
    const table = { name: 'directTypes', columns: ['id', 'flag', 'note', 'absent'] };
    const stored = async (id: string) => (await sql<Record<string, unknown>>`select * from direct_types where id = ${id}`.execute(db.kysely)).rows[0];
    for (const [flag, note] of [[true, null], [false, 'a note']] as const) {
      const direct = { id: newId(), flag, note, absent: undefined };
      await insertRow(db.kysely, db.sqlite, table, direct);
      const viaKysely = { ...direct, id: newId() };
      await (db.kysely as unknown as Kysely<Record<string, Record<string, unknown>>>).insertInto('directTypes').values(viaKysely).execute();
      expect(await stored(direct.id)).toEqual({ id: direct.id, flag: flag ? 1 : 0, note, absent: 'default' });
      expect(await stored(viaKysely.id)).toEqual({ ...(await stored(direct.id)), id: viaKysely.id });
    }
  });

  it('updates only the version the caller read, and says whether it did', async () => {
    const row = post('read');
    await insertRow(db.kysely, db.sqlite, posts.table, row);
    const later = isoTime(Date.now() + 1000);
    // Another version than the one read: nothing written.
    expect(await updateRow(db.kysely, db.sqlite, posts.table, row.id, '2000-01-01T00:00:00.000Z', { title: 'stale', updatedAt: later })).toBe(false);
    expect(await storedPost(row.id)).toMatchObject({ title: 'read', updatedAt: now });
    // The version read: written, the other fields left alone, an absent change not written.
    expect(await updateRow(db.kysely, db.sqlite, posts.table, row.id, now, { title: 'updated', body: undefined, updatedAt: later })).toBe(true);
    expect(await storedPost(row.id)).toEqual({ ...row, title: 'updated', updatedAt: later });
    // Whatever the version.
    expect(await updateRow(db.kysely, db.sqlite, posts.table, row.id, null, { status: 'published' })).toBe(true);
    expect(await storedPost(row.id)).toEqual({ ...row, title: 'updated', status: 'published', updatedAt: later });
    expect(await updateRow(db.kysely, db.sqlite, posts.table, 'no-such-id', null, { status: 'published' })).toBe(false);

    // Booleans and nulls as Kysely writes them.
    const table = { name: 'directTypes', columns: ['id', 'flag', 'note', 'absent'] };
    const typed = { id: newId(), flag: false, note: 'a note' };
    await insertRow(db.kysely, db.sqlite, table, typed);
    expect(await updateRow(db.kysely, db.sqlite, table, typed.id, null, { flag: true, note: null })).toBe(true);
    expect((await sql<Record<string, unknown>>`select * from direct_types where id = ${typed.id}`.execute(db.kysely)).rows[0]).toEqual({
      id: typed.id,
      flag: 1,
      note: null,
      absent: 'default',
    });
  });

  it('leaves a row holding anything but plain values to Kysely', async () => {
    const row = post(sql<string>`'writ' || 'ten by SQL'`);
    await insertRow(db.kysely, db.sqlite, posts.table, row);
    expect((await storedPost(row.id))?.title).toBe('written by SQL');
    // The same columns with plain values again go the direct way, and still store them as given.
    const plain = post('plain after SQL');
    await insertRow(db.kysely, db.sqlite, posts.table, plain);
    expect((await storedPost(plain.id))?.title).toBe('plain after SQL');
    expect(await updateRow(db.kysely, db.sqlite, posts.table, plain.id, null, { title: sql<string>`upper(title)` })).toBe(true);
    expect((await storedPost(plain.id))?.title).toBe('PLAIN AFTER SQL');
  });

  it("leaves an expression's factory to Kysely too, whatever the shape's first row was", async () => {
    const plain = post('plain first');
    await insertRow(db.kysely, db.sqlite, posts.table, plain);
    const factory = post((eb: { val(value: string): unknown }) => eb.val('from a factory'));
    await insertRow(db.kysely, db.sqlite, posts.table, factory);
    expect((await storedPost(factory.id))?.title).toBe('from a factory');
  });

  it('writes through a transaction it is given, which commits or rolls back with it', async () => {
    const kept = post('kept');
    const dropped = post('dropped');
    await db.kysely.transaction().execute(async (trx) => {
      await insertRow(trx, db.sqlite, posts.table, kept);
      expect(await updateRow(trx, db.sqlite, posts.table, kept.id, now, { title: 'kept, updated' })).toBe(true);
    });
    await expect(
      db.kysely.transaction().execute(async (trx) => {
        await insertRow(trx, db.sqlite, posts.table, dropped);
        expect(await updateRow(trx, db.sqlite, posts.table, kept.id, null, { title: 'rolled back' })).toBe(true);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect((await storedPost(kept.id))?.title).toBe('kept, updated');
    expect(await storedPost(dropped.id)).toBeUndefined();
  });

  it('tells shapes apart whatever their columns are named', async () => {
    db.sqlite!.prepare('create table direct_names (id text primary key, "a" text, "b" text, "a,b" text, "1:a" text)').run();
    const table = { name: 'directNames', columns: ['id', 'a', 'b', 'a,b', '1:a'] };
    const rows = [
      { id: newId(), a: 'one', b: 'two' },
      { id: newId(), 'a,b': 'three' },
      { id: newId(), '1:a': 'four' },
      { id: newId(), a: 'five' },
    ];
    for (const row of rows) await insertRow(db.kysely, db.sqlite, table, row);
    const stored = (await sql<Record<string, unknown>>`select * from direct_names`.execute(db.kysely)).rows;
    expect(stored).toEqual(expect.arrayContaining(rows.map((row) => ({ a: null, b: null, 'a,b': null, '1:a': null, ...row }))));
    expect(stored).toHaveLength(rows.length);
  });

  it('fails as Kysely would on a constraint, and leaves no transaction open', async () => {
    const row = post('first');
    await insertRow(db.kysely, db.sqlite, posts.table, row);
    await expect(insertRow(db.kysely, db.sqlite, posts.table, { ...row, title: 'second' })).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(db.sqlite!.inTransaction).toBe(false);
    expect((await storedPost(row.id))?.title).toBe('first');
    const next = post('next');
    await insertRow(db.kysely, db.sqlite, posts.table, next);
    expect((await storedPost(next.id))?.title).toBe('next');
  });

  it('waits for the write lock another process holds, holding the connection so no transaction begins on it meanwhile', async () => {
    const other = new SQLite(sqliteFileIn(dataDir));
    other.exec('begin immediate');
    const row = post('after the other process');
    let inserted = false;
    let read = false;
    const insert = insertRow(db.kysely, db.sqlite, posts.table, row).then(() => (inserted = true));
    // An update of a row of another process's making waits the same way.
    let updated = false;
    const update = updateRow(db.kysely, db.sqlite, posts.table, row.id, null, { status: 'published' }).then((done) => (updated = done));
    // A Kysely statement of this process waits for the connection the insert holds.
    const reading = db.kysely.selectFrom('posts').select('id').execute().then(() => (read = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect([inserted, updated, read, db.sqlite!.inTransaction]).toEqual([false, false, false, false]);
    other.exec('commit');
    other.close();
    await Promise.all([insert, update, reading]);
    expect(updated).toBe(true);
    expect(await storedPost(row.id)).toMatchObject({ title: 'after the other process', status: 'published' });
  });
});
