import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../../src/errors/registry.js';
import { InProcessEventBus } from '../../src/events/event-bus.js';
import { replacePost } from '../../src/operations/posts.js';
import { replaceUser } from '../../src/operations/users.js';
import { posts } from '../../src/resources/posts.js';
import { users } from '../../src/resources/users.js';
import { openDb, type Db } from '../../src/storage/dialect.js';
import { isoTime, newId, nextVersion } from '../../src/storage/ids.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { loadRow } from '../../src/storage/resource-rows.js';
import { insertUser } from '../../src/storage/users.js';

describe('nextVersion', () => {
  it('is now when now is later than the version replaced', () => {
    const before = Date.now();
    const version = nextVersion('2000-01-01T00:00:00.000Z');
    expect(Date.parse(version)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(version)).toBeLessThanOrEqual(Date.now());
  });

  it('is one millisecond after the version replaced when now is not later', () => {
    const replaced = isoTime(Date.now() + 60_000);
    expect(Date.parse(nextVersion(replaced))).toBe(Date.parse(replaced) + 1);
  });

  it('is now when the version replaced is not a time', () => {
    const before = Date.now();
    expect(Date.parse(nextVersion('not a time'))).toBeGreaterThanOrEqual(before);
  });
});

/**
 * Two writes of one resource that both read the same version: the second must see the first, even when both
 * run in the same millisecond — the version is `updatedAt`, so a write must never leave the version it read.
 * The clock is stopped (only `Date`), so that every write happens in the same millisecond.
 */
describe('two writes that read the same version, in one millisecond', () => {
  let dataDir: string;
  let db: Db;
  const authorId = newId();

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-same-ms-'));
    db = await openDb({ databaseUrl: null, dataDir, backgroundCheckpoints: false });
    await migrateToLatest(db);
    await insertUser(db.kysely, { id: authorId, email: 'same-ms@example.com', name: 'Same', role: 'member', active: true, passwordHash: 'unused' }, isoTime(Date.now()));
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  afterAll(async () => {
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const deps = () => ({ db: db.kysely, sqlite: db.sqlite, events: new InProcessEventBus(), invalidateSubject: () => {} }) as never;
  const refusedAsChanged = (error: unknown) => error instanceof ApiError && error.code === 'PRECONDITION_FAILED';

  it('a post: the second is refused (412), and the first stays', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    const now = isoTime(Date.now());
    const id = newId();
    await db.kysely.insertInto('posts').values({ id, authorId, title: 'read', body: 'text', status: 'draft', createdAt: now, updatedAt: now }).execute();
    const read = loadRow(db.kysely, db.sqlite, posts.table, id) as Record<string, unknown>;

    const first = await replacePost({ body: { title: 'first', body: 'text', status: 'draft' } } as never, { resource: read, deps: deps() } as never);
    expect(first).toMatchObject({ status: 200, body: { title: 'first' } });
    const second = Promise.resolve(replacePost({ body: { title: 'second', body: 'text', status: 'published' } } as never, { resource: read, deps: deps() } as never));
    await expect(second.then(() => 'written', (error: unknown) => (refusedAsChanged(error) ? 'refused' : error))).resolves.toBe('refused');
    expect(loadRow(db.kysely, db.sqlite, posts.table, id)).toMatchObject({ title: 'first', status: 'draft', updatedAt: isoTime(Date.parse(now) + 1) });
  });

  it('a user: the second is refused (412), and the first stays', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    const now = isoTime(Date.now());
    const id = newId();
    await insertUser(db.kysely, { id, email: `${id}@example.com`, name: 'Read', role: 'member', active: true, passwordHash: 'unused' }, now);
    const read = loadRow(db.kysely, db.sqlite, users.table, id) as Record<string, unknown>;
    const body = { email: `${id}@example.com`, role: 'member', active: true };

    const first = await replaceUser({ body: { ...body, name: 'First' } } as never, { resource: read, deps: deps() } as never);
    expect(first).toMatchObject({ status: 200, body: { name: 'First' } });
    const second = Promise.resolve(replaceUser({ body: { ...body, name: 'Second', active: false } } as never, { resource: read, deps: deps() } as never));
    await expect(second.then(() => 'written', (error: unknown) => (refusedAsChanged(error) ? 'refused' : error))).resolves.toBe('refused');
    expect(loadRow(db.kysely, db.sqlite, users.table, id)).toMatchObject({ name: 'First', active: 1 });
  });
});
