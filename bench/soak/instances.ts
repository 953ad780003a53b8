import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../processes.js';

/** One compiled server process (`npm start` runs the same dist/src/main.js), its output in a log file. */
export interface Instance {
  name: string;
  child: ChildProcess;
  port: number;
  dataDir: string;
  log: string;
  exited: Promise<number | null>;
}

/**
 * Starts an instance in `workDir`/<name> and waits until `/healthz` answers. Its inspector listens on a free
 * loopback port (live-heap.ts reads the heap through it).
 */
export async function startInstance(name: string, workDir: string, env: Record<string, string>): Promise<Instance> {
  const port = await freePort();
  const dataDir = path.join(workDir, name);
  fs.mkdirSync(dataDir, { recursive: true });
  const log = path.join(workDir, `${name}.log`);
  const output = fs.openSync(log, 'w');
  const child = spawn(process.execPath, ['--inspect=127.0.0.1:0', 'dist/src/main.js'], {
    env: { PATH: process.env.PATH ?? '', ...env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir },
    stdio: ['ignore', output, output],
  });
  fs.closeSync(output);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const instance = { name, child, port, dataDir, log, exited };
  for (let attempt = 0; attempt < 300; attempt++) {
    if (child.exitCode !== null) throw new Error(`instance ${name} exited with ${child.exitCode} while starting; see ${log}`);
    if (await isLive(port)) return instance;
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error(`instance ${name} did not answer /healthz within 30 s; see ${log}`);
}

async function isLive(port: number): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200;
  } catch {
    return false;
  }
}

/**
 * SIGTERM, as an operator stops it: the server drains, flushes the audit log and exits 0. Resolves to its
 * exit code, or null when it had to be killed after `graceMs`.
 */
export async function stopInstance(instance: Instance, graceMs = 30_000): Promise<number | null> {
  if (instance.child.exitCode !== null) return instance.child.exitCode;
  instance.child.kill('SIGTERM');
  const code = await Promise.race([instance.exited, sleep(graceMs).then(() => 'late' as const)]);
  if (code !== 'late') return code;
  instance.child.kill('SIGKILL');
  await instance.exited;
  return null;
}

/** Resident memory of a process in MiB (Linux /proc); null once it is gone. */
export function residentMiB(pid: number): number | null {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : null;
  } catch {
    return null;
  }
}
