import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../../src/app.js';
import { configFrom } from '../../../src/config/config.js';
import { KeyStore } from '../../../src/oauth/keys/key-store.js';
import { startKeyRotation } from '../../../src/oauth/keys/rotation-schedule.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { makeConfig } from '../fixtures.js';

const DAY_MS = 86_400_000;
const AHEAD_MS = 15 * 60 * 1000;

async function until(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.each(DATABASE_KINDS)('the key rotation schedule on %s', (kind) => {
  let t: TestDatabase;
  const dirs: string[] = [];
  afterEach(async () => {
    await t.drop();
    for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('checks at start and then on every interval, logging each rotation it makes', async () => {
    t = await createTestDatabase(kind);
    let now = Date.now();
    const keys = await KeyStore.open(t.db, makeConfig({ SIGNING_KEY_ROTATION_DAYS: '1' }), { clock: () => now });
    const logged: { msg: string; obj: object }[] = [];
    const logger = { info: (obj: object, msg: string) => logged.push({ msg, obj }), error: (obj: object, msg: string) => logged.push({ msg, obj }) };

    now += DAY_MS - AHEAD_MS;
    const schedule = startKeyRotation(keys, logger, 50);
    // The first check runs as the schedule starts, not an interval later.
    await until(() => logged.length === 1, 'the first rotation');
    const first = await t.db.kysely.selectFrom('signingKeys').select(['kid', 'alg']).where('generation', '=', 2).orderBy('alg').execute();
    expect(logged).toEqual([
      { msg: 'keys.rotated', obj: { kid: first[0]!.kid, idTokenKid: first[1]!.kid, activatesAt: new Date(now + AHEAD_MS).toISOString() } },
    ]);

    // Nothing more while the next keys wait; the next day's rotation comes from the timer.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(logged).toHaveLength(1);
    now += DAY_MS;
    await until(() => logged.length === 2, 'the second rotation');
    expect(logged[1]).toMatchObject({ msg: 'keys.rotated' });
    await schedule.stop();
    expect(await t.db.kysely.selectFrom('signingKeys').select('kid').where('generation', '=', 3).execute()).toHaveLength(2);
  });

  it('logs a failed check and keeps checking', async () => {
    t = await createTestDatabase(kind);
    const keys = await KeyStore.open(t.db, makeConfig({ SIGNING_KEY_ROTATION_DAYS: '1' }));
    const errors: unknown[] = [];
    const failing = Object.assign(Object.create(keys) as KeyStore, {
      rotateIfDue: async () => {
        throw new Error('database unreachable');
      },
    });
    const schedule = startKeyRotation(failing, { info: () => {}, error: (obj: object, msg: string) => errors.push({ msg, obj }) }, 20);
    await until(() => errors.length >= 2, 'two failed checks');
    await schedule.stop();
    expect(errors[0]).toEqual({ msg: 'keys.rotation_failed', obj: { err: new Error('database unreachable') } });
  });

  it('runs in the server: keys past SIGNING_KEY_ROTATION_DAYS are rotated as it starts, and the JWKS lists the next ones', async () => {
    t = await createTestDatabase(kind);
    // Keys made two days ago, by a server that has been stopped since.
    const aged = await KeyStore.open(t.db, makeConfig(), { clock: () => Date.now() - 2 * DAY_MS });
    const old = [(await aged.signingKey()).kid, (await aged.signingKey('RS256')).kid];
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-rotation-'));
    dirs.push(dataDir);
    const app = await buildApp(configFrom({ DATA_DIR: dataDir, ISSUER: 'http://127.0.0.1:3000', SIGNING_KEY_ROTATION_DAYS: '1' }), { db: t.db });
    try {
      await until(async () => (await t.db.kysely.selectFrom('signingKeys').select('kid').execute()).length === 4, 'the rotation');
      const next = await t.db.kysely.selectFrom('signingKeys').select(['kid', 'alg']).where('generation', '=', 2).orderBy('alg').execute();
      const response = await app.fastify.inject({ method: 'GET', url: '/.well-known/jwks.json' });
      expect(response.statusCode).toBe(200);
      expect(response.headers['cache-control']).toBe('public, max-age=300');
      expect(response.headers['content-type']).toBe('application/jwk-set+json; charset=utf-8');
      // The next keys first, then the signing ones (each pair by kid, the same order on every server).
      const byKidDescending = (a: string, b: string) => (a < b ? 1 : -1);
      expect(response.json().keys.map((key: { kid: string }) => key.kid)).toEqual([
        ...next.map((key) => key.kid).sort(byKidDescending),
        ...[...old].sort(byKidDescending),
      ]);
      // The old keys sign until the new ones activate.
      expect((await app.keys.signingKey()).kid).toBe(old[0]);
    } finally {
      await app.close();
    }
  });
});
