import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/server-process.js';

// `npm run mock` logs its requests like the server does: credentials in the URL are masked.

describe('the mock server process', () => {
  it('logs a request without the token or secret its URL carried', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', 'tsx', 'mock/server.ts'], {
      env: { PATH: process.env.PATH, PORT: String(port), HOST: '127.0.0.1', NODE_ENV: 'test' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    child.stderr!.on('data', (chunk) => (output += chunk));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await expect.poll(() => output.includes('Server listening'), { timeout: 30_000, interval: 100 }).toBe(true);
      const res = await fetch(`http://127.0.0.1:${port}/v1/posts?access_token=S3cretT0ken&bearer=B3arer&limit=2`);
      await res.arrayBuffer();
      await expect.poll(() => output.includes('incoming request'), { timeout: 5000, interval: 50 }).toBe(true);
      expect(output).toContain('access_token=[REDACTED]');
      expect(output).not.toContain('S3cretT0ken');
      expect(output).not.toContain('B3arer');
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  }, 60_000);
});
