import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openDb, type Db } from '../../src/storage/dialect.js';
import { migrateToLatest } from '../../src/storage/migrate.js';
import { createTestDatabase } from '../helpers/databases.js';

// The CLI as operators run it: a separate Node process (bin/portcullis.js, the compiled CLI), talking to a
// real database.

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A child process running the CLI; only the variables given reach it, never the test's own. */
export function startCli(args: readonly string[], env: Record<string, string>, entry: readonly string[] = ['bin/portcullis.js'], cwd = REPO_ROOT) {
  const child: ChildProcess = spawn(process.execPath, [...entry, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const result = new Promise<CliResult>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
  return { child, result, stdout: () => stdout, stderr: () => stderr };
}

export function runCli(args: readonly string[], env: Record<string, string>): Promise<CliResult> {
  return startCli(args, env).result;
}

/** The same database the CLI is pointed at, opened by the test to arrange rows and check effects. */
export interface CliDatabase {
  env: Record<string, string>;
  db: Db;
  close(): Promise<void>;
}

export async function openCliDatabase(kind: 'sqlite' | 'postgres'): Promise<CliDatabase> {
  if (kind === 'postgres') {
    const t = await createTestDatabase('postgres');
    return { env: { DATABASE_URL: t.url! }, db: t.db, close: () => t.drop() };
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-cli-'));
  const db = await openDb({ databaseUrl: null, dataDir });
  await migrateToLatest(db);
  return {
    env: { DATA_DIR: dataDir },
    db,
    close: async () => {
      await db.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Polls until `check` holds, for output that a long-running child writes in its own time. */
export async function waitFor(check: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Every CLI run is a fresh Node process, and a test makes several. */
export const CLI_TEST_TIMEOUT = 60_000;
