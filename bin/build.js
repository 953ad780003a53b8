// Compiles the server and the CLI to dist/ once (tsc), so that neither `npm start` nor a CLI command runs a
// TypeScript loader; the CLI is then bundled into one module (esbuild), because loading ~1,300 small
// modules (kysely alone is several hundred) cost more than anything a command does for --help. `ensureBuilt()` is what every launcher calls first: it compares the newest
// modification time among the sources with the one recorded at the last build (a few hundred stat calls,
// about a millisecond) and runs `tsc` only when a source is newer or dist/ is missing.
// `node bin/build.js` builds unconditionally (the `prepare` script: `npm ci` builds at install).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const DIST = path.join(ROOT, 'dist');
const STAMP = path.join(DIST, '.build-stamp.json');
const SOURCES = ['src', 'generated', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];
/** Files the compiled code loads at run time that tsc does not emit. */
const ASSETS = ['src/storage/wal-checkpoint-worker.mjs'];

function newestMtime(entry) {
  const stat = fs.statSync(entry, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const name of fs.readdirSync(entry)) newest = Math.max(newest, newestMtime(path.join(entry, name)));
  return newest;
}

function sourcesMtime() {
  return Math.max(...SOURCES.map((entry) => newestMtime(path.join(ROOT, entry))));
}

/** The compiled CLI and everything it imports in one file; native and optional modules stay external. */
function bundleCli() {
  const esbuild = path.join(path.dirname(createRequire(import.meta.url).resolve('esbuild/package.json')), 'bin', 'esbuild');
  const banner = "import { createRequire as __portcullisRequire } from 'node:module'; const require = __portcullisRequire(import.meta.url);";
  const result = spawnSync(
    esbuild,
    [
      path.join(DIST, 'src/cli/main.js'),
      '--bundle',
      '--platform=node',
      '--format=esm',
      '--target=node20',
      `--outfile=${path.join(DIST, 'cli.mjs')}`,
      '--external:better-sqlite3',
      '--external:pg-native',
      `--banner:js=${banner}`,
      '--minify-whitespace',
      '--minify-syntax',
      '--log-level=warning',
    ],
    { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  if (result.status !== 0) {
    process.stderr.write('portcullis: bundling the CLI failed (see above)\n');
    process.exit(1);
  }
}

export function build() {
  const newest = sourcesMtime();
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const result = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json')], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.status !== 0) {
    process.stderr.write('portcullis: the TypeScript build failed (see above)\n');
    process.exit(1);
  }
  for (const asset of ASSETS) fs.copyFileSync(path.join(ROOT, asset), path.join(DIST, asset));
  bundleCli();
  fs.writeFileSync(STAMP, JSON.stringify({ sourcesMtime: newest }));
}

export function ensureBuilt() {
  let built = -1;
  try {
    built = JSON.parse(fs.readFileSync(STAMP, 'utf8')).sourcesMtime;
  } catch {
    // never built
  }
  if (built < sourcesMtime()) build();
}

/**
 * `npx portcullis` in this checkout: npm runs a command found in node_modules/.bin at once, while a `bin`
 * of the project's own package.json makes it install the project into its cache first (about a second).
 */
function linkBin() {
  const bin = path.join(ROOT, 'node_modules', '.bin');
  fs.mkdirSync(bin, { recursive: true });
  const link = path.join(bin, 'portcullis');
  fs.rmSync(link, { force: true });
  fs.symlinkSync(path.relative(bin, path.join(ROOT, 'bin', 'portcullis.js')), link);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // --if-stale: only when a source changed (the test run's setup); --link: also link the CLI for npx.
  if (process.argv.includes('--if-stale')) ensureBuilt();
  else build();
  if (process.argv.includes('--link')) linkBin();
}
