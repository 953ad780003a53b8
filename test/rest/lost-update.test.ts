import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { watchStatements } from '../helpers/sqlite-statements.js';
import type { SqliteHandle } from '../../src/storage/sqlite-handle.js';
import { startTestApp, type TestApp, type TestUser } from '../helpers/app.js';

// A write builds on the copy its request read: when another request changed the resource in between, the
// write is refused (412) instead of writing back what it read — a member's PATCH of their name must not
// undo an admin's deactivation that committed meanwhile.

/** Runs `between` once, right after the next read of the row with this id (the request's load-resource). */
function afterNextRead(handle: SqliteHandle, state: { id: string | null; between: () => void }): SqliteHandle {
  // A row reader's statement starts with its marker comment (src/storage/row-reader.ts).
  return watchStatements(
    handle,
    (sql) => (/^(\/\*[^*]*\*\/ *)?select/i.test(sql) ? ['get'] : []),
    ({ statement, result }) => {
      // An object, or a row reader's array of values (its id where the statement's id column is).
      const row = result as { id?: string } | unknown[] | undefined;
      const id = Array.isArray(row) ? row[statement.columns().findIndex((column) => column.name === 'id')] : row?.id;
      if (state.id !== null && id === state.id) {
        state.id = null;
        state.between();
      }
    },
  );
}

describe('a write never writes back a copy that changed meanwhile', () => {
  let t: TestApp;
  let member: TestUser;
  let raw: SqliteHandle;
  const state: { id: string | null; between: () => void } = { id: null, between: () => {} };

  beforeAll(async () => {
    t = await startTestApp('sqlite', { RATE_LIMIT_MAX: '1000000' }, {
      wrapDb: (db) => {
        raw = db.sqlite!;
        return { ...db, sqlite: afterNextRead(db.sqlite!, state) };
      },
    });
    member = await t.createUser('member');
  });
  afterAll(() => t.close());

  it("refuses a member's PATCH of their name with 412 when an admin deactivated them after it was read; the deactivation stays", async () => {
    const token = await member.token();
    state.id = member.id;
    state.between = () => raw.prepare('update users set active = 0, updated_at = ? where id = ?').run(new Date(Date.now() + 5).toISOString(), member.id);
    const res = await t.request({ method: 'PATCH', url: `/v1/users/${member.id}`, token, headers: { 'content-type': 'application/merge-patch+json' }, body: { name: 'Renamed' } });
    expect(res.statusCode, res.body).toBe(412);
    expect(res.json()).toEqual({ error: { code: 'PRECONDITION_FAILED', message: 'The resource changed while this request was processed; read it again and retry.' } });
    const row = raw.prepare('select name, active from users where id = ?').get(member.id) as { name: string; active: number };
    expect(row.active).toBe(0);
    expect(row.name).not.toBe('Renamed');
  });

  it('refuses a post PATCH whose post was changed after it was read, and lets the retry through', async () => {
    const author = await t.createUser('member');
    const token = await author.token();
    const created = await t.request({ method: 'POST', url: '/v1/posts', token, body: { title: 'first', body: 'text', status: 'draft' } });
    const post = created.json();
    state.id = post.id;
    state.between = () => raw.prepare("update posts set title = 'changed elsewhere', updated_at = ? where id = ?").run(new Date(Date.now() + 5).toISOString(), post.id);
    const patch = () => t.request({ method: 'PATCH', url: `/v1/posts/${post.id}`, token, headers: { 'content-type': 'application/merge-patch+json' }, body: { status: 'published' } });
    expect((await patch()).statusCode).toBe(412);
    expect(raw.prepare('select title, status from posts where id = ?').get(post.id)).toEqual({ title: 'changed elsewhere', status: 'draft' });
    const retried = await patch();
    expect(retried.statusCode, retried.body).toBe(200);
    expect(retried.json()).toMatchObject({ title: 'changed elsewhere', status: 'published' });
  });
});
