import { spawnSync } from 'node:child_process';

/** The real-process suites run the compiled server and CLI, as operators do: build them first if stale. */
export default function setup(): void {
  const result = spawnSync(process.execPath, ['bin/build.js', '--if-stale'], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error('the build failed');
}
