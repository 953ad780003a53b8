import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/app.js';
import { configFrom } from '../../src/config/config.js';
import { InvalidationFeed } from '../../src/oauth/tokens/invalidation-feed.js';
import type { Invalidation } from '../../src/storage/invalidations.js';
import { onInvalidationWritten, recordInvalidation } from '../../src/storage/invalidations.js';
import { ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET } from '../helpers/app.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';

describe.each(DATABASE_KINDS)('invalidation feed on %s', (kind) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(kind);
  });
  afterEach(() => t.drop());

  function follower(options: { clock?: () => number } = {}) {
    const applied: Invalidation[] = [];
    let resets = 0;
    const feed = new InvalidationFeed(t.db.kysely, { apply: (events) => applied.push(...events), reset: () => resets++ }, { intervalMs: 60_000, ...options });
    return { feed, applied, resets: () => resets };
  }

  it('applies each change once, from the moment it started following', async () => {
    await recordInvalidation(t.db.kysely, 'user', 'before-start');
    const { feed, applied } = follower();
    await feed.start();
    await recordInvalidation(t.db.kysely, 'token', 'jti-1');
    await recordInvalidation(t.db.kysely, 'client', 'client-1');
    await feed.poll();
    await feed.poll();
    expect(applied.map(({ kind, target }) => [kind, target])).toEqual([
      ['token', 'jti-1'],
      ['client', 'client-1'],
    ]);
    await feed.stop();
  });

  it('picks up a change whose sequence number was taken before one it already read (a late commit)', async () => {
    let now = 1_000_000;
    const { feed, applied } = follower({ clock: () => now });
    await feed.start();
    const base = applied.length;
    // Two writers: the later number commits first, the earlier one a moment after the follower read.
    const latest = Number((await t.db.kysely.selectFrom('invalidations').select((eb) => eb.fn.max('seq').as('seq')).executeTakeFirst())?.seq ?? 0);
    await t.db.kysely.insertInto('invalidations').values({ seq: latest + 2, kind: 'user', target: 'second', createdAt: new Date().toISOString() } as never).execute();
    await feed.poll();
    now += 500;
    await t.db.kysely.insertInto('invalidations').values({ seq: latest + 1, kind: 'user', target: 'first', createdAt: new Date().toISOString() } as never).execute();
    await feed.poll();
    now += 5000;
    await feed.poll();
    expect(applied.slice(base).map((e) => e.target)).toEqual(['second', 'first']);
    await feed.stop();
  });

  it('reads a write of this process back at once and announces it; a poll asked for by another server reads at once', async () => {
    let announced = 0;
    const writer = new InvalidationFeed(t.db.kysely, { apply: () => {}, reset: () => {} }, { intervalMs: 60_000, announce: () => announced++ });
    const { feed: reader, applied } = follower();
    await Promise.all([writer.start(), reader.start()]);
    const stop = onInvalidationWritten(() => writer.nudge());
    try {
      await recordInvalidation(t.db.kysely, 'token', 'jti-announced');
      // Neither feed polls on its own for a minute: the writer reads back its own write and announces it.
      await expect.poll(() => announced, { timeout: 1000, interval: 10 }).toBe(1);
      expect(applied).toEqual([]);
      reader.pollNow();
      await expect.poll(() => applied.map((e) => e.target), { timeout: 1000, interval: 10 }).toEqual(['jti-announced']);
      // A feed that did not write announces nothing of what it reads.
      let readerAnnounced = 0;
      const quiet = new InvalidationFeed(t.db.kysely, { apply: () => {}, reset: () => {} }, { intervalMs: 60_000, announce: () => readerAnnounced++ });
      await quiet.start();
      stop();
      await recordInvalidation(t.db.kysely, 'token', 'jti-elsewhere');
      quiet.pollNow();
      await new Promise((resolve) => setTimeout(resolve, 100));
      await quiet.stop();
      expect(readerAnnounced).toBe(0);
    } finally {
      stop();
      await Promise.all([writer.stop(), reader.stop()]);
    }
  });

  it('forgets everything it cached when it could not read the sequence for half an hour', async () => {
    let now = 1_000_000;
    const { feed, resets } = follower({ clock: () => now });
    await feed.start();
    now += 31 * 60 * 1000;
    await feed.poll();
    expect(resets()).toBe(1);
    await feed.stop();
  });

  describe('two server instances on one database', () => {
    let apps: App[] = [];
    // The instances' DATA_DIR (where a first start writes bootstrap.json): the test's own, never ./data.
    let dataDir: string;
    beforeEach(() => {
      dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-feed-'));
    });
    afterEach(async () => {
      for (const app of apps) await app.close();
      apps = [];
      fs.rmSync(dataDir, { recursive: true, force: true });
    });

    async function instance(): Promise<App> {
      const app = await buildApp(
        configFrom({
          DATA_DIR: dataDir,
          ISSUER: 'http://127.0.0.1:3000',
          BOOTSTRAP_CLIENT_ID: ADMIN_CLIENT_ID,
          BOOTSTRAP_CLIENT_SECRET: ADMIN_CLIENT_SECRET,
          BOOTSTRAP_ADMIN_PASSWORD: 'admin-password-for-tests',
          KEY_ENCRYPTION_SECRET: 'test-key-encryption-secret-0123456789abcdef',
        }),
        { db: t.db },
      );
      apps.push(app);
      return app;
    }

    it('a scope taken from a client and a role changed through one instance apply on the other within a second', async () => {
      const a = await instance();
      const b = await instance();
      const tokenRes = await a.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${ADMIN_CLIENT_ID}:${ADMIN_CLIENT_SECRET}`).toString('base64')}` },
        payload: 'grant_type=client_credentials',
      });
      const admin = JSON.parse(tokenRes.body).access_token as string;
      const created = await a.fastify.inject({
        method: 'POST',
        url: '/v1/clients',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ name: 'Svc', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts', 'read:clients'], role: 'admin' }),
      });
      const client = JSON.parse(created.body) as { id: string; clientId: string; clientSecret: string };
      const issued = await a.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ grant_type: 'client_credentials', client_id: client.clientId, client_secret: client.clientSecret }).toString(),
      });
      const token = JSON.parse(issued.body).access_token as string;
      const onB = (url: string) => b.fastify.inject({ url, headers: { authorization: `Bearer ${token}` } }).then((r) => r.statusCode);
      expect(await onB('/v1/posts')).toBe(200);
      expect(await onB(`/v1/clients/${client.id}`)).toBe(200);

      const put = await a.fastify.inject({
        method: 'PUT',
        url: `/v1/clients/${client.id}`,
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ name: 'Svc', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:clients'], role: 'member', accessTokenFormat: 'jwt', accessTokenTtl: 600, firstParty: false, legacy: false }),
      });
      expect(put.statusCode, put.body).toBe(200);
      const start = Date.now();
      let statuses = [await onB('/v1/posts'), await onB(`/v1/clients/${client.id}`)];
      while ((statuses[0] !== 403 || statuses[1] !== 403) && Date.now() - start < 1000) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        statuses = [await onB('/v1/posts'), await onB(`/v1/clients/${client.id}`)];
      }
      // read:posts is gone from the client (INSUFFICIENT_SCOPE), and a member may not read clients (FORBIDDEN).
      expect(statuses).toEqual([403, 403]);
    });
  });
});
