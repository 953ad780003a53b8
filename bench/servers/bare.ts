/**
 * Baseline: a bare Fastify route that returns the same post JSON as the pipeline's GET /v1/posts/{postId},
 * serialised with the same response schema. No authentication, policy, database or audit.
 */
import Fastify from 'fastify';
import { routes } from '../../generated/routes.js';

const getPost = routes.find((r) => r.operationId === 'getPost')!;
const post = JSON.parse(process.argv[2] ?? '{}') as Record<string, unknown>;

const app = Fastify({ logger: false });
app.get('/v1/posts/:postId', { schema: { response: { 200: getPost.schema.response['200'] } } }, async () => post);
await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port } })}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
