/**
 * The full pipeline on embedded SQLite: a member's published post, read by that member with a JWT or an
 * opaque token (scope + role + per-resource check, SQLite read, ETag, audit).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/config.js';
import { findClientByClientId } from '../../src/storage/clients.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { insertUser } from '../../src/storage/users.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-bench-'));
const config = loadConfig({
  ...process.env,
  DATA_DIR: dataDir,
  PORT: '0',
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  RATE_LIMIT_MAX: '1000000',
  // A million a second: the budget is counted (that cost is measured) but never spent.
  RATE_LIMIT_WINDOW: '1',
  BOOTSTRAP_CLIENT_ID: 'bench-admin',
});
const app = await buildApp(config);
const db = app.db.kysely;
const userId = newId();
const now = nowIso();
await insertUser(db, { id: userId, email: 'bench@example.com', name: 'Bench', role: 'member', active: true, passwordHash: 'unused' }, now);
const post = { id: newId(), authorId: userId, title: 'Benchmark post', body: 'A post read over and over.', status: 'published', createdAt: now, updatedAt: now };
await db.insertInto('posts').values(post).execute();
const client = (await findClientByClientId(db, 'bench-admin'))!;
const issue = async (format: 'jwt' | 'opaque') =>
  (
    await app.tokens.issueAccessToken({
      client: { ...client, accessTokenFormat: format, accessTokenTtl: 3600 },
      subject: userId,
      subjectType: 'user',
      scopes: ['read:posts'],
      grantType: 'authorization_code',
    })
  ).accessToken;

await app.fastify.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.fastify.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port, post, jwt: await issue('jwt'), opaque: await issue('opaque') } })}\n`);
process.on('SIGTERM', () => {
  void app.close().then(() => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    process.exit(0);
  });
});
