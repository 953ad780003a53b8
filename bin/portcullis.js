#!/usr/bin/env node
// Launcher for `npx portcullis` / an installed `portcullis`: the CLI is TypeScript, run through tsx.
// Paths are resolved from this file, not the working directory, so it works from any cwd.
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register({ tsconfig: fileURLToPath(new URL('../tsconfig.json', import.meta.url)) });
await import(new URL('../src/cli/main.ts', import.meta.url).href);
