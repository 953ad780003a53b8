/**
 * Portcullis's token endpoint as the bench loads it (token-app.ts): POST /oauth/token authenticates the
 * client (SHA-256 of the secret, a database read), selects the scopes, signs (ES256) or generates the
 * token, inserts its `access_tokens` row and records the audit event.
 */
import { buildTokenBenchApp } from './token-app.js';

const bench = await buildTokenBenchApp();
const { fastify } = bench.app;
await fastify.listen({ host: '127.0.0.1', port: 0 });
const { port } = fastify.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port, pid: process.pid } })}\n`);
process.on('SIGTERM', () => {
  void bench.close().then(() => process.exit(0));
});
