import { randomBytes } from 'node:crypto';
import { runCli } from './cli.js';
import type { Target } from './target.js';

const SEED_POSTS = 10;

/**
 * The posts that exist before the load, written by a user (an editor, through the password grant of a
 * legacy client: the only way to a user's token without a browser), so that GraphQL resolves their author:
 * a client, which writes the load's posts, is no user. They are the oldest, so `posts(first: 10)` lists them.
 */
export async function seedPosts(targets: readonly Target[], cliEnv: Record<string, string>): Promise<string[]> {
  const password = randomBytes(18).toString('base64url');
  const email = 'soak.author@example.com';
  await runCli(['users', 'create', '--email', email, '--name', 'Soak Author', '--role', 'editor', '--password', password], cliEnv);
  const client = await runCli(
    ['clients', 'create', '--name', 'Soak seed', '--type', 'confidential', '--grant', 'password', '--scope', 'read:posts', '--scope', 'write:posts', '--legacy'],
    cliEnv,
  );
  const basic = Buffer.from(`${encodeURIComponent(String(client.clientId))}:${encodeURIComponent(String(client.clientSecret))}`).toString('base64');
  const form = new URLSearchParams({ grant_type: 'password', username: email, password, scope: 'read:posts write:posts' }).toString();
  const granted = await targets[0]!.send('POST', '/oauth/token', { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' }, form);
  if (granted.status !== 200) throw new Error(`the seed user got no token: ${granted.status} ${granted.body}`);
  const token = (JSON.parse(granted.body) as { access_token: string }).access_token;
  const ids: string[] = [];
  for (let i = 0; i < SEED_POSTS; i++) {
    const body = JSON.stringify({ title: `Seed ${i}`, body: 'Written before the soak.', status: 'published' });
    const created = await targets[i % targets.length]!.send('POST', '/v1/posts', { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body);
    if (created.status !== 201) throw new Error(`seed post ${i}: ${created.status} ${created.body}`);
    ids.push((JSON.parse(created.body) as { id: string }).id);
  }
  return ids;
}
