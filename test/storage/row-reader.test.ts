import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/storage/dialect.js';
import { isoTime, newId } from '../../src/storage/ids.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { whereEqual } from '../../src/storage/filter-sql.js';
import { loadRow, loadRows, selectRowPage } from '../../src/storage/resource-rows.js';
import { rowMaker, rowReader } from '../../src/storage/row-reader.js';
import { insertUser } from '../../src/storage/users.js';
import { posts } from '../../src/resources/posts.js';
import { users } from '../../src/resources/users.js';

/** The same values, the same fields in the same order: what better-sqlite3's own rows would have been. */
function expectSameRow(actual: unknown, expected: unknown): void {
  expect(actual).toEqual(expected);
  expect(Object.keys(actual as object)).toEqual(Object.keys(expected as object));
  expect(Object.getPrototypeOf(actual)).toBe(Object.prototype);
}

describe('rowMaker', () => {
  it('makes an object of the values, named by the columns, in their order', () => {
    const make = rowMaker(['id', 'authorId', 'count', 'missing']);
    const row = make(['p1', 'u1', 3, null]);
    expectSameRow(row, { id: 'p1', authorId: 'u1', count: 3, missing: null });
    // Every row its own object.
    expect(make(['p2', 'u2', 4, null])).not.toBe(row);
  });

  it('takes a later column of the same name, as better-sqlite3 does', () => {
    expect(rowMaker(['a', 'b', 'a'])([1, 2, 3])).toEqual({ a: 3, b: 2 });
  });

  it('keeps any column name as data, never as code', () => {
    const names = ['a"b', 'c\\d', 'e}; globalThis.rowMakerRan = true; ({f', "g'h", 'line\nbreak', '\u2028', 'constructor', ''];
    const row = rowMaker(names)(names.map((_, i) => i));
    expect(Object.keys(row)).toEqual(names);
    names.forEach((name, i) => expect(row[name]).toBe(i));
    expect((globalThis as { rowMakerRan?: boolean }).rowMakerRan).toBeUndefined();
  });

  it('refuses a column named __proto__, which would set the prototype instead of a field', () => {
    expect(() => rowMaker(['id', '__proto__'])).toThrow('__proto__');
  });
});

describe('rowReader and the direct resource reads on SQLite', () => {
  let dataDir: string;
  let db: Db;
  const userId = newId();
  const postIds = [newId(), newId(), newId()];

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-row-reader-'));
    db = await openDb({ databaseUrl: null, dataDir, backgroundCheckpoints: false });
    await migrateToLatest(db);
    const now = isoTime(Date.now());
    await insertUser(db.kysely, { id: userId, email: 'reader@example.com', name: 'Reader', role: 'member', active: true, passwordHash: 'unused' }, now);
    for (const [i, id] of postIds.entries()) {
      await db.kysely
        .insertInto('posts')
        .values({ id, authorId: userId, title: `Post ${i}`, body: i === 1 ? '' : 'Text with "quotes" and ünïcode', status: i === 2 ? 'draft' : 'published', createdAt: now, updatedAt: now })
        .execute();
    }
    const sqlite = db.sqlite!;
    sqlite.prepare('create table reader_types (id integer primary key, label text, amount real, absent text, data blob)').run();
    sqlite.prepare('insert into reader_types (id, label, amount, absent, data) values (?, ?, ?, ?, ?)').run(1, 'one', 1.5, null, Buffer.from([0, 1, 2]));
    sqlite.prepare('insert into reader_types (id, label, amount, absent, data) values (?, ?, ?, ?, ?)').run(2, 'two', -2, null, null);
  });

  afterAll(async () => {
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('reads each row as better-sqlite3 would have made it, every type of value included', () => {
    const sql = 'select id, label, amount, absent, data from reader_types';
    const reader = rowReader(db.sqlite!, `${sql} where id = ?`);
    const plain = db.sqlite!.prepare(`${sql} where id = ?`);
    for (const id of [1, 2]) expectSameRow(reader.get(id), plain.get(id));
    expect(reader.get(3)).toBeUndefined();
    expect(reader.get(1)!.data).toEqual(Buffer.from([0, 1, 2]));

    const all = rowReader(db.sqlite!, `${sql} where id >= ? order by id desc`);
    const expected = db.sqlite!.prepare(`${sql} where id >= ? order by id desc`).all(1) as object[];
    const rows = all.all(1);
    expect(rows).toHaveLength(2);
    rows.forEach((row, i) => expectSameRow(row, expected[i]));
    expect(all.all(10)).toEqual([]);
    expect(all.source).toBe(`${sql} where id >= ? order by id desc`);
  });

  it('never hands its statement, switched to arrays, to another caller of the same SQL', () => {
    const sql = 'select id, label from reader_types where id = ?';
    const reader = rowReader(db.sqlite!, sql);
    expect(reader.get(1)).toEqual({ id: 1, label: 'one' });
    // Kysely and the other direct statements prepare through the same cache, by text.
    expect(db.sqlite!.prepare(sql).get(1)).toEqual({ id: 1, label: 'one' });
    // A second reader of the same SQL shares the first one's statement, and reads alike.
    expect(rowReader(db.sqlite!, sql).get(2)).toEqual({ id: 2, label: 'two' });
    expect(reader.get(2)).toEqual({ id: 2, label: 'two' });
  });

  it('loads resources by id, by ids and by page exactly as Kysely reads them', async () => {
    for (const module of [posts, users]) {
      const ids = module === posts ? postIds : [userId];
      const viaKysely = (await db.kysely
        .selectFrom(module.table.name as 'posts')
        .select(module.table.columns as never)
        .where('id', 'in', ids)
        .orderBy('id')
        .execute()) as Record<string, unknown>[];
      expect(viaKysely).toHaveLength(ids.length);
      for (const expected of viaKysely) {
        const row = loadRow(db.kysely, db.sqlite, module.table, expected.id as string);
        expectSameRow(row, expected);
      }
      const many = await loadRows(db.kysely, db.sqlite, module.table, [...ids, 'no-such-id']);
      expect(many.map((row) => row.id).sort()).toEqual([...ids].sort());
      for (const row of many) expectSameRow(row, loadRow(db.kysely, db.sqlite, module.table, row.id as string));
    }
    expect(loadRow(db.kysely, db.sqlite, posts.table, 'no-such-id')).toBeNull();

    // A page read by its prepared statement (the shape lists the values Kysely binds, in its order).
    const page = await selectRowPage(db.kysely, db.sqlite, posts.table, whereEqual({ status: 'published' }), { limit: 1 }, { key: 'status', values: ['published'] });
    const published = postIds.slice(0, 2).sort();
    expect(page.rows.map((row) => row.id)).toEqual([published[0]]);
    expect(page.next).not.toBeNull();
    expectSameRow(page.rows[0], loadRow(db.kysely, db.sqlite, posts.table, published[0]!));
  });
});
