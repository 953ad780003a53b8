import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../cli/cli-process.js';

// Operators run compiled JavaScript: `npm start`, `npm run cli` and `npx portcullis` start dist/, built once
// (at `npm ci`, or on first use), never a TypeScript loader.

const pkg = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/**
 * Runs `args` under a module hook that reports every TypeScript file Node is asked to load, with DATA_DIR a
 * fresh directory (`prepare` runs first in it: the CLI needs a database there).
 */
function runWatchingForTypeScript(args: string[], prepare?: (env: NodeJS.ProcessEnv) => void) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-hook-'));
  try {
    prepare?.({ PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATA_DIR: dir });
    fs.writeFileSync(
      path.join(dir, 'hooks.mjs'),
      "export async function load(url, context, next) { if (/\\.(c|m)?tsx?$/.test(new URL(url).pathname)) process.stderr.write(`loaded TypeScript: ${url}\\n`); return next(url, context); }\n",
    );
    fs.writeFileSync(path.join(dir, 'register.mjs'), `import { register } from 'node:module';\nregister(${JSON.stringify(new URL(`file://${dir}/hooks.mjs`).href)});\n`);
    return spawnSync(process.execPath, ['--import', path.join(dir, 'register.mjs'), ...args], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATA_DIR: dir },
      timeout: 30_000,
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('compiled JavaScript for operators', () => {
  it('starts the server and the CLI from node launchers, with the compiler a runtime dependency and tsx not', () => {
    // exec: npm's signals (SIGTERM from a supervisor) reach the server, not a shell that would orphan it.
    expect(pkg.scripts.start).toBe('exec node bin/server.js');
    expect(pkg.scripts.cli).toBe('node bin/portcullis.js');
    expect(pkg.scripts.prepare).toBe('node bin/build.js --link');
    for (const script of ['start', 'cli', 'migrate']) expect(pkg.scripts[script]).not.toMatch(/tsx/);
    expect(Object.keys(pkg.dependencies)).toEqual(expect.arrayContaining(['typescript', 'esbuild']));
    expect(pkg.dependencies.tsx).toBeUndefined();
  });

  it('runs a CLI command without loading a single TypeScript file', () => {
    const migrate = (env: NodeJS.ProcessEnv) => {
      const migrated = spawnSync(process.execPath, ['bin/portcullis.js', 'migrate'], { cwd: REPO_ROOT, encoding: 'utf8', env, timeout: 30_000 });
      expect(migrated.status, migrated.stderr).toBe(0);
    };
    const result = runWatchingForTypeScript(['bin/portcullis.js', 'users', 'list', '--json'], migrate);
    expect(result.stderr).toBe('');
    expect({ status: result.status, stdout: result.stdout }).toEqual({ status: 0, stdout: '[]\n' });
  });

  it('loads the server without a single TypeScript file', () => {
    const result = runWatchingForTypeScript(['-e', "process.argv[2] = '--version'; await import('./dist/src/config/config.js'); await import('./dist/src/app.js');", '--input-type=module']);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });
});
