import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // graphql ships CommonJS (`main`, what Node loads for the server and for Mercurius) and ESM (`module`,
  // which Vite would pick): one process must use one of them, or graphql-js refuses the other's schema
  // objects. Tests load what production loads.
  resolve: { alias: [{ find: /^graphql$/, replacement: fileURLToPath(new URL('./node_modules/graphql/index.js', import.meta.url)) }] },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    environment: 'node',
    testTimeout: 20000,
    hookTimeout: 30000,
    pool: 'forks',
    maxWorkers: 2,
    env: { NODE_ENV: 'test' },
  },
});
