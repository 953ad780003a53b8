/**
 * The full GraphQL pipeline on embedded SQLite: POST /graphql with an editor's JWT (scopes, role and
 * per-resource checks per root field, batched loaders, the authors' read checks, audit).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/config.js';
import { findClientByClientId } from '../../src/storage/clients.js';
import { insertBenchData } from './graphql-data.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-bench-'));
const config = loadConfig({ ...process.env, DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'warn', RATE_LIMIT_MAX: '1000000', RATE_LIMIT_WINDOW: '1', BOOTSTRAP_CLIENT_ID: 'bench-admin' });
const app = await buildApp(config);
const data = await insertBenchData(app.db.kysely);
const client = (await findClientByClientId(app.db.kysely, 'bench-admin'))!;
const { accessToken } = await app.tokens.issueAccessToken({
  client: { ...client, accessTokenFormat: 'jwt', accessTokenTtl: 3600 },
  subject: data.readerId,
  subjectType: 'user',
  scopes: ['read:posts', 'read:users'],
  grantType: 'authorization_code',
});

await app.fastify.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.fastify.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port, postId: data.posts[0]!.id, token: accessToken } })}\n`);
process.on('SIGTERM', () => {
  void app.close().then(() => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    process.exit(0);
  });
});
