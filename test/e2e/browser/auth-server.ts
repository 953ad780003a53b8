import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { buildApp, type App } from '../../../src/app.js';
import { configFrom } from '../../../src/config/config.js';
import { hashPassword } from '../../../src/oauth/passwords.js';
import { newId, nowIso } from '../../../src/storage/ids.js';
import { insertUser } from '../../../src/storage/users.js';
import { freePort } from '../../helpers/server-process.js';
import type { TlsFiles } from './tls.js';

const ADMIN_CLIENT_ID = 'portcullis-admin';
const ADMIN_CLIENT_SECRET = 'browser-test-admin-client-secret-0123456789';

export interface SignInUser {
  id: string;
  email: string;
  password: string;
}

export interface AuthServer {
  /** The issuer, which is also the URL the browser uses: http://127.0.0.1:<port>, or https:// with a certificate. */
  issuer: string;
  app: App;
  /** Registers a client through POST /v1/clients, as an administrator would; returns the registration. */
  registerClient(registration: Record<string, unknown>): Promise<{ clientId: string }>;
  /** A member with a known password, ready to sign in on the pages. */
  createUser(): Promise<SignInUser>;
  close(): Promise<void>;
}

/**
 * Portcullis on a real socket on 127.0.0.1 with SQLite in a temporary directory. The port is chosen first
 * because the issuer must be the very URL the browser navigates to (`iss`, form targets, cookies). With a
 * certificate, an https front on its own port (the TLS a deployment's proxy would end) passes every request
 * on to the server, and the issuer is https: a browser app on https must find its issuer on the same
 * scheme to be same-site with it (its silent renewal's frame carries the SameSite=Lax session cookie).
 */
export async function startAuthServer(env: Record<string, string> = {}, tls?: TlsFiles): Promise<AuthServer> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-browser-'));
  const port = await freePort();
  const front = tls ? await startTlsFront(tls, port) : null;
  const issuer = front ? `https://127.0.0.1:${front.port}` : `http://127.0.0.1:${port}`;
  /** Where this process reaches the server itself (Node's fetch would refuse the self-signed certificate). */
  const direct = `http://127.0.0.1:${port}`;
  const config = configFrom({
    DATA_DIR: dataDir,
    ISSUER: issuer,
    BOOTSTRAP_ADMIN_EMAIL: 'admin@example.com',
    BOOTSTRAP_ADMIN_PASSWORD: 'admin-password-for-browser-tests',
    BOOTSTRAP_CLIENT_ID: ADMIN_CLIENT_ID,
    BOOTSTRAP_CLIENT_SECRET: ADMIN_CLIENT_SECRET,
    KEY_ENCRYPTION_SECRET: 'browser-test-key-encryption-secret-0123456789',
    ...env,
  });
  const app = await buildApp(config);
  await app.fastify.listen({ host: '127.0.0.1', port });

  async function adminToken(): Promise<string> {
    const res = await fetch(`${direct}/oauth/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${ADMIN_CLIENT_ID}:${ADMIN_CLIENT_SECRET}`).toString('base64')}` },
      body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'write:clients' }),
    });
    if (res.status !== 200) throw new Error(`admin token: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { access_token: string }).access_token;
  }

  return {
    issuer,
    app,
    async registerClient(registration) {
      const res = await fetch(`${direct}/v1/clients`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await adminToken()}`, 'content-type': 'application/json' },
        body: JSON.stringify(registration),
      });
      if (res.status !== 201) throw new Error(`client registration: ${res.status} ${await res.text()}`);
      return (await res.json()) as { clientId: string };
    },
    async createUser() {
      const id = newId();
      const user = { id, email: `member-${id}@example.com`, password: `password-${id}` };
      await insertUser(app.db.kysely, { id, email: user.email, name: `Member ${id.slice(-4)}`, role: 'member', active: true, passwordHash: await hashPassword(user.password) }, nowIso());
      return user;
    },
    async close() {
      await front?.close();
      await app.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** An https server on a port of its own that forwards each request, as it came, to the server on `port`. */
async function startTlsFront(tls: TlsFiles, port: number): Promise<{ port: number; close(): Promise<void> }> {
  const server = https.createServer(tls, (request, response) => {
    const upstream = http.request({ host: '127.0.0.1', port, method: request.method, path: request.url, headers: request.headers }, (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(response);
    });
    upstream.on('error', () => response.writeHead(502).end());
    request.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
