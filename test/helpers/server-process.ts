import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach } from 'vitest';
import { freePort } from './free-port.js';

// The server as operators run it (`npm start` runs the compiled dist/src/main.js), on a real socket; every
// process started here is killed and its data directory removed after each test.

export { freePort };

export interface Running {
  child: ChildProcess;
  base: string;
  dataDir: string;
  output: () => string;
  exited: Promise<number | null>;
}

const started: Running[] = [];
const startedForSuite: Running[] = [];

/** A server that lives until the end of the test that started it; with `forSuite`, until the end of the file. */
export async function startServer(
  env: Record<string, string> = {},
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-e2e-')),
  { forSuite = false }: { forSuite?: boolean } = {},
): Promise<Running> {
  const port = await freePort();
  let output = '';
  const child = spawn(process.execPath, ['dist/src/main.js'], {
    env: { PATH: process.env.PATH, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const running = { child, base: `http://127.0.0.1:${port}`, dataDir, output: () => output, exited };
  (forSuite ? startedForSuite : started).push(running);
  return running;
}

/** Up to 30 s: a first start on a busy machine (migrations, keys, the bootstrap admin) takes several. */
export async function waitUntilLive(server: Running): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      const res = await fetch(`${server.base}/healthz`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (server.child.exitCode !== null) throw new Error(`server exited early:\n${server.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server did not start:\n${server.output()}`);
}

/** A client-credentials token of the admin client the server bootstrapped (bootstrap.json in its DATA_DIR). */
export async function bootstrapAdminToken(server: Running): Promise<string> {
  const bootstrap = JSON.parse(fs.readFileSync(path.join(server.dataDir, 'bootstrap.json'), 'utf8')) as { clients: { admin: { client_id: string; client_secret: string } } };
  const { client_id: clientId, client_secret: secret } = bootstrap.clients.admin;
  const res = await fetch(`${server.base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}` },
    body: 'grant_type=client_credentials',
  });
  if (res.status !== 200) throw new Error(`the token endpoint answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

async function stopAll(servers: Running[]): Promise<void> {
  for (const server of servers.splice(0)) {
    if (server.child.exitCode === null) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    fs.rmSync(server.dataDir, { recursive: true, force: true });
  }
}

afterEach(() => stopAll(started));
afterAll(() => stopAll(startedForSuite));

