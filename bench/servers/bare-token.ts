/**
 * Floor for the token endpoint: a bare Fastify route at POST /oauth/token with the same form body parsing
 * (UTF-8, URLSearchParams) that answers with a fixed token response. No client authentication, signing,
 * storage or audit: what HTTP and the framework alone cost per token on this machine, in the same run.
 */
import Fastify from 'fastify';

const token = process.argv[2] ?? 'bench-token';
const body = { access_token: token, token_type: 'Bearer', expires_in: 600, scope: 'read:posts write:posts' };
const utf8 = new TextDecoder('utf-8', { fatal: true });

const app = Fastify({ logger: false });
app.removeAllContentTypeParsers();
app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (_request, raw, done) => {
  done(null, new URLSearchParams(utf8.decode(raw as Buffer)));
});
app.post('/oauth/token', async (_request, reply) => reply.header('cache-control', 'no-store').send(body));
await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port } })}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
