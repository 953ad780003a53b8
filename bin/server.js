#!/usr/bin/env node
// `npm start`: the compiled server (dist/, built by `npm ci` or here on first start).
import { ensureBuilt } from './build.js';

ensureBuilt();
await import(new URL('../dist/src/main.js', import.meta.url).href);
