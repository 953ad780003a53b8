/**
 * Reference point (b): bare Mercurius with its JIT, resolving the same queries from memory — no token, no
 * database, no audit. The ceiling of GraphQL execution on this machine.
 */
import Fastify from 'fastify';
import mercurius from 'mercurius';
import fs from 'node:fs';
import { newId } from '../../src/storage/ids.js';

const now = new Date().toISOString();
const authors = Array.from({ length: 10 }, (_, i) => ({ id: newId(), name: `Author ${i}`, email: `author-${i}@example.com`, role: 'member', active: true, createdAt: now, updatedAt: now }));
const posts = Array.from({ length: 20 }, (_, i) => ({ id: newId(), authorId: authors[i % 10]!.id, title: `Post ${i}`, body: 'A post read over and over.', status: 'published', createdAt: now, updatedAt: now }));
const postsById = new Map(posts.map((post) => [post.id, post]));
const authorsById = new Map(authors.map((author) => [author.id, author]));

const app = Fastify({ logger: { level: 'warn' } });
await app.register(mercurius, {
  schema: fs.readFileSync('schema.graphql', 'utf8'),
  jit: 1,
  resolvers: {
    Query: {
      post: (_root: unknown, { id }: { id: string }) => postsById.get(id) ?? null,
      posts: (_root: unknown, { first }: { first: number }) => ({ nodes: posts.slice(0, first), pageInfo: { endCursor: null, hasNextPage: false } }),
    },
    Post: { author: (post: { authorId: string }) => authorsById.get(post.authorId) ?? null },
  } as never,
});

await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port, postId: posts[0]!.id, token: 'none' } })}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
