#!/usr/bin/env node
// Launcher for `npx portcullis` and `npm run cli`: the compiled, bundled CLI (dist/cli.mjs, built by
// `npm ci` or here on first use). Paths are resolved from this file, so it works from any cwd.
import { ensureBuilt } from './build.js';

ensureBuilt();
await import(new URL('../dist/cli.mjs', import.meta.url).href);
