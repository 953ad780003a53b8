import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildApp, GENERATED_API } from '../../src/app.js';
import { configFrom } from '../../src/config/config.js';

// One request that never finishes must not hold a shutdown: its connection is closed once the drain time is up.
describe('shutdown with a request that never finishes', () => {
  it('closes its connection after the drain time, and the server stops', async () => {
    let started: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const api = {
      ...GENERATED_API,
      handlers: {
        ...GENERATED_API.handlers,
        // Stands in for a handler that never settles.
        getRestContract: () => {
          started();
          return new Promise<never>(() => {});
        },
      },
    };
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-drain-'));
    const app = await buildApp(
      configFrom({ DATA_DIR: dataDir, ISSUER: 'http://127.0.0.1:3000', KEY_ENCRYPTION_SECRET: 'test-key-encryption-secret-0123456789abcdef' }),
      { api, shutdownDrainMs: 500 },
    );
    try {
      await app.fastify.listen({ host: '127.0.0.1', port: 0 });
      const { port } = app.fastify.server.address() as AddressInfo;
      const stuck = fetch(`http://127.0.0.1:${port}/v1/rest`).then(
        (res) => ({ status: res.status }),
        (error: Error) => ({ error: error.message }),
      );
      await running;
      const closing = Date.now();
      await app.close();
      const took = Date.now() - closing;
      expect(took).toBeGreaterThanOrEqual(400);
      expect(await stuck).toEqual({ error: 'fetch failed' });
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
