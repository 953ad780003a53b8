/**
 * The data every GraphQL benchmark server holds: ten members, twenty published posts of theirs, and an editor
 * who reads them (editors may read user profiles, so `author` resolves). The queries the scenarios send.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../src/storage/schema.js';
import { newId, nowIso } from '../../src/storage/ids.js';
import { insertUser } from '../../src/storage/users.js';

export const POST_QUERY = 'query ($id: ID!) { post(id: $id) { id title author { id name } } }';
export const LIST_QUERY = '{ posts(first: 20) { nodes { id title author { id name } } } }';

export interface BenchData {
  readerId: string;
  authors: { id: string; name: string }[];
  posts: { id: string; authorId: string; title: string; body: string; status: string; createdAt: string; updatedAt: string }[];
}

export async function insertBenchData(db: Kysely<Database>): Promise<BenchData> {
  const now = nowIso();
  const readerId = newId();
  await insertUser(db, { id: readerId, email: 'reader@example.com', name: 'Reader', role: 'editor', active: true, passwordHash: 'unused' }, now);
  const authors: BenchData['authors'] = [];
  for (let i = 0; i < 10; i++) {
    const author = { id: newId(), name: `Author ${i}` };
    await insertUser(db, { ...author, email: `author-${i}@example.com`, role: 'member', active: true, passwordHash: 'unused' }, now);
    authors.push(author);
  }
  const posts: BenchData['posts'] = [];
  for (let i = 0; i < 20; i++) {
    const post = { id: newId(), authorId: authors[i % 10]!.id, title: `Post ${i}`, body: 'A post read over and over.', status: 'published', createdAt: now, updatedAt: now };
    await db.insertInto('posts').values(post).execute();
    posts.push(post);
  }
  return { readerId, authors, posts };
}
