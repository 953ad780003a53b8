import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TlsFiles } from './tls.js';

const SPA_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'spa');

/** URL paths and the static file each serves; the redirect targets are the app's own page. */
const FILES: Readonly<Record<string, { file: string; type: string }>> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/callback': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/silent-callback': { file: 'silent-callback.html', type: 'text/html; charset=utf-8' },
  '/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/oauth-client.js': { file: 'oauth-client.js', type: 'text/javascript; charset=utf-8' },
  '/silent-callback.js': { file: 'silent-callback.js', type: 'text/javascript; charset=utf-8' },
};

export interface SpaConfig {
  issuer: string;
  clientId: string;
  scope: string;
}

export interface SpaServer {
  origin: string;
  redirectUri: string;
  silentRedirectUri: string;
  postLogoutRedirectUri: string;
  /** What /config.json tells the app (set once the client is registered). */
  configure(config: SpaConfig): void;
  close(): Promise<void>;
}

/**
 * The single-page app's own origin: a static server on another port of 127.0.0.1, over https when given a
 * certificate (as a browser app is deployed; on plain http it would be a native app). Its CSP lets the
 * app run only its own scripts, talk to itself and the issuer, and frame only the issuer (silent renewal),
 * so a browser test also shows that the app needs nothing more from the authorization server.
 */
export async function startSpaServer(tls?: TlsFiles): Promise<SpaServer> {
  let config: SpaConfig | null = null;
  let issuerOrigin = '';
  const handle: http.RequestListener = (request, response) => {
    const pathname = new URL(request.url ?? '/', 'http://spa').pathname;
    if (pathname === '/config.json' && config !== null) {
      response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      response.end(JSON.stringify({ ...config, redirectUri: spa.redirectUri, silentRedirectUri: spa.silentRedirectUri, postLogoutRedirectUri: spa.postLogoutRedirectUri }));
      return;
    }
    if (pathname === '/favicon.ico') {
      // Chromium asks every origin for one; the app has none, and a 404 would be a console error.
      response.writeHead(204).end();
      return;
    }
    const entry = FILES[pathname];
    if (request.method !== 'GET' || entry === undefined) {
      response.writeHead(404, { 'content-type': 'text/plain' });
      response.end('not found');
      return;
    }
    response.writeHead(200, {
      'content-type': entry.type,
      'cache-control': 'no-store',
      // The callback URL carries the code until the app replaces it: it is never sent on as a Referer.
      'referrer-policy': 'no-referrer',
      'content-security-policy': [
        "default-src 'none'",
        "script-src 'self'",
        `connect-src 'self' ${issuerOrigin}`,
        `frame-src 'self' ${issuerOrigin}`,
        "img-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
      ].join('; '),
    });
    fs.createReadStream(path.join(SPA_DIR, entry.file)).pipe(response);
  };
  const server = tls ? https.createServer(tls, handle) : http.createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `${tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const spa: SpaServer = {
    origin,
    redirectUri: `${origin}/callback`,
    silentRedirectUri: `${origin}/silent-callback`,
    postLogoutRedirectUri: `${origin}/`,
    configure(next) {
      config = next;
      issuerOrigin = new URL(next.issuer).origin;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
  return spa;
}
