import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../../src/errors/registry.js';
import { InProcessEventBus } from '../../src/events/event-bus.js';
import { createComment, replaceComment } from '../../src/operations/comments.js';
import { comments } from '../../src/resources/comments.js';
import { openDb, type Db } from '../../src/storage/dialect.js';
import { isoTime, newId } from '../../src/storage/ids.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { loadRow } from '../../src/storage/resource-rows.js';
import { insertUser } from '../../src/storage/users.js';

/**
 * The pipeline loads the resource a write targets before the handler runs; another request may delete it in
 * between. The write then answers as if the resource had been gone already — 404, nothing stored — never a
 * 500 from the database's constraint, nor a 200 for a write that wrote nothing.
 */
describe('a write whose resource was deleted after the pipeline loaded it', () => {
  let dataDir: string;
  let db: Db;
  const authorId = newId();
  const now = isoTime(Date.now());
  const principal = { kind: 'user', subject: authorId, id: authorId, role: 'member', clientId: 'test', scopes: new Set<string>() };

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-after-delete-'));
    db = await openDb({ databaseUrl: null, dataDir, backgroundCheckpoints: false });
    await migrateToLatest(db);
    await insertUser(db.kysely, { id: authorId, email: 'after-delete@example.com', name: 'After', role: 'member', active: true, passwordHash: 'unused' }, now);
  });
  afterAll(async () => {
    await db.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const deps = () => ({ db: db.kysely, sqlite: db.sqlite, events: new InProcessEventBus() }) as never;
  const outcome = (result: unknown) =>
    Promise.resolve(result).then(
      () => 'written',
      (error: unknown) => (error instanceof ApiError ? error.code : error),
    );

  it('a comment on a post deleted meanwhile: 404, no comment stored', async () => {
    const postId = newId();
    const events = new InProcessEventBus();
    const publish = vi.spyOn(events, 'publish');
    const answer = outcome(createComment({ params: { postId }, body: { body: 'too late' } } as never, { principal, deps: { ...(deps() as object), events } } as never));
    await expect(answer).resolves.toBe('NOT_FOUND');
    expect(await db.kysely.selectFrom('comments').select('id').where('postId', '=', postId).execute()).toEqual([]);
    expect(publish).not.toHaveBeenCalled();
  });

  it('a comment replaced after it was deleted: 404, nothing stored', async () => {
    const postId = newId();
    await db.kysely.insertInto('posts').values({ id: postId, authorId, title: 'post', body: 'text', status: 'published', createdAt: now, updatedAt: now }).execute();
    const id = newId();
    await db.kysely.insertInto('comments').values({ id, postId, authorId, body: 'read', createdAt: now, updatedAt: now }).execute();
    const read = loadRow(db.kysely, db.sqlite, comments.table, id) as Record<string, unknown>;
    await db.kysely.deleteFrom('comments').where('id', '=', id).execute();
    await expect(outcome(replaceComment({ body: { body: 'too late' } } as never, { resource: read, deps: deps() } as never))).resolves.toBe('NOT_FOUND');
    expect(loadRow(db.kysely, db.sqlite, comments.table, id)).toBeNull();
  });
});
