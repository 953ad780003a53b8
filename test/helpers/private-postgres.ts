import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './server-process.js';

/**
 * A PostgreSQL cluster of the test's own (initdb and pg_ctl in a temporary directory, on a free port of
 * 127.0.0.1), for tests that stop and start the database under a running server: the shared server that the
 * other suites use is never touched. Without the binaries (/usr/lib/postgresql/<version>/bin, or the folder
 * PORTCULLIS_POSTGRES_BIN names) such tests are skipped with a notice; with PORTCULLIS_TEST_POSTGRES=require
 * (set by .ci/run) they fail instead, as the other PostgreSQL suites do (databases.ts).
 */

const run = promisify(execFile);
const POSTGRES_REQUIRED = process.env.PORTCULLIS_TEST_POSTGRES === 'require';
/** initdb refuses to run as root: as root, the cluster belongs to this operating-system user. */
const CLUSTER_OWNER = 'postgres';

function findBinaries(): string | null {
  const named = process.env.PORTCULLIS_POSTGRES_BIN;
  const candidates = named
    ? [named]
    : fs.existsSync('/usr/lib/postgresql')
      ? fs
          .readdirSync('/usr/lib/postgresql')
          .sort((a, b) => Number(b) - Number(a))
          .map((version) => path.join('/usr/lib/postgresql', version, 'bin'))
      : [];
  const found = candidates.find((dir) => ['initdb', 'pg_ctl'].every((tool) => isExecutable(path.join(dir, tool))));
  if (found) return found;
  const where = named ?? '/usr/lib/postgresql/*/bin';
  if (POSTGRES_REQUIRED) throw new Error(`PostgreSQL's initdb and pg_ctl are required but not found in ${where} (or set PORTCULLIS_POSTGRES_BIN)`);
  console.warn(`[portcullis tests] initdb and pg_ctl not found in ${where}: skipping the tests that stop and start a PostgreSQL of their own`);
  return null;
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export const POSTGRES_BINARIES = findBinaries();

export interface PrivatePostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  /** pg_ctl stop: `fast` ends every session (with an error to its client), `immediate` kills them. */
  stop(mode: 'fast' | 'immediate'): Promise<void>;
  /** Starts the stopped cluster again on the same port, and waits until it accepts connections. */
  start(): Promise<void>;
  /** Stops every process of the running cluster (SIGSTOP) without closing a connection: a frozen server. */
  freeze(): void;
  /** Lets a frozen cluster run on (SIGCONT). */
  thaw(): void;
  /** Stops the cluster (whatever its state) and removes its directory. */
  destroy(): Promise<void>;
}

/** The postmaster (first line of postmaster.pid) and every process it started. */
function clusterProcesses(data: string): number[] {
  const postmaster = Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = execFileSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number);
  return [postmaster, ...children];
}

/** A fresh cluster, started; trust authentication for the loopback address only. */
export async function startPrivatePostgres({ maxConnections = 50 }: { maxConnections?: number } = {}): Promise<PrivatePostgres> {
  if (POSTGRES_BINARIES === null) throw new Error('PostgreSQL binaries are not available');
  const bin = POSTGRES_BINARIES;
  const asRoot = process.getuid?.() === 0;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'portcullis-pg-'));
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', CLUSTER_OWNER], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', CLUSTER_OWNER], { encoding: 'utf8' }).trim());
    fs.chownSync(root, uid, gid);
  }
  const data = path.join(root, 'data');
  const log = path.join(root, 'postgres.log');
  const tool = (name: string, args: string[]) =>
    asRoot ? run('runuser', ['-u', CLUSTER_OWNER, '--', path.join(bin, name), ...args]) : run(path.join(bin, name), args);
  await tool('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions']);
  const port = await freePort();
  // Durability is not what these tests check: fsync off keeps the cluster quick on a shared machine.
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${root} -c fsync=off -c max_connections=${maxConnections}`;
  const start = async () => {
    await tool('pg_ctl', ['-D', data, '-l', log, '-o', options, '-w', '-t', '20', 'start']);
  };
  const thaw = () => {
    for (const pid of clusterProcesses(data)) process.kill(pid, 'SIGCONT');
  };
  let running = false;
  await start();
  running = true;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async stop(mode) {
      await tool('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '20', 'stop']);
      running = false;
    },
    async start() {
      await start();
      running = true;
    },
    freeze() {
      for (const pid of clusterProcesses(data)) process.kill(pid, 'SIGSTOP');
    },
    thaw,
    async destroy() {
      if (running) thaw();
      if (running) await tool('pg_ctl', ['-D', data, '-m', 'immediate', '-w', '-t', '20', 'stop']).catch(() => {});
      running = false;
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
