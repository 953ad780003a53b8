import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface TlsFiles {
  key: string;
  cert: string;
}

let generated: TlsFiles | undefined;

/**
 * A self-signed certificate for 127.0.0.1, made once per process with the machine's openssl: a browser app
 * must live on an https origin to be one (a public client on a loopback http address is a native app, whose
 * client_id any local program can use: RFC 8252 §8.6). Chromium is started to accept it.
 */
export function testCertificate(): TlsFiles {
  if (generated) return generated;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-tls-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', keyFile, '-out', certFile,
  ], { stdio: 'ignore' });
  generated = { key: fs.readFileSync(keyFile, 'utf8'), cert: fs.readFileSync(certFile, 'utf8') };
  fs.rmSync(dir, { recursive: true, force: true });
  return generated;
}
