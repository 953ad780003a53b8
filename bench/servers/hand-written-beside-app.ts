/**
 * The hand-written equivalent (hand-written.ts), served by a process that has first built the whole server
 * (`buildApp`, not listening): the same request code, in a V8 heap and with inline caches shaped by
 * everything the server loads and runs at start-up. `npm run bench:instructions` compares it with the
 * hand-written server on its own, to tell what the process costs from what the pipeline's code costs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/config.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-bench-app-'));
// Built, not served: its timers and connections live until the process ends.
await buildApp(loadConfig({ ...process.env, DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'warn', BOOTSTRAP_CLIENT_ID: 'bench-admin' }));
process.on('exit', () => fs.rmSync(dataDir, { recursive: true, force: true }));
await import('./hand-written.js');
