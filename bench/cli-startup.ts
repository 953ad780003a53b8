import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';

// How long an operator waits for the CLI: `--help`, run as a fresh process, 15 times each way, median in
// milliseconds. The baseline is the same CLI run from its TypeScript sources through tsx (how every
// command ran before the build step), measured in this same process tree.

const RUNS = 15;

const ways: Record<string, [string, string[]]> = {
  'tsx src/cli/main.ts (baseline)': [process.execPath, ['--import', 'tsx', 'src/cli/main.ts', '--help']],
  'node bin/portcullis.js': [process.execPath, ['bin/portcullis.js', '--help']],
  'npx portcullis': ['npx', ['portcullis', '--help']],
};

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const rows: string[] = [];
for (const [name, [command, args]] of Object.entries(ways)) {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    const result = spawnSync(command, args, { encoding: 'utf8', env: { ...process.env, NODE_ENV: 'production' } });
    times.push(performance.now() - start);
    if (result.status !== 0) throw new Error(`${name} failed: ${result.stderr}`);
  }
  rows.push(`| ${name} | ${median(times).toFixed(0)} | ${Math.min(...times).toFixed(0)} |`);
}
console.log(`| CLI --help, fresh process (${RUNS} runs) | median ms | best ms |\n|---|---|---|\n${rows.join('\n')}`);
