// Runs in a worker thread, so it is plain JavaScript: the thread has no TypeScript loader of its own.
// See wal-checkpointer.ts for why checkpoints run here.
import { parentPort, workerData } from 'node:worker_threads';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';

const SQLite = createRequire(import.meta.url)('better-sqlite3');
const { file, intervalMs } = workerData;

lowestPriority();

const database = new SQLite(file);
database.pragma('busy_timeout = 1000');

/** SQLite's own threshold: a WAL holding more frames than this, not yet copied, is a worker falling behind. */
const BEHIND_FRAMES = 1000;
let behind = false;

function checkpoint() {
  try {
    // PASSIVE copies what it can without waiting for, or blocking, readers and writers.
    const [result] = database.pragma('wal_checkpoint(PASSIVE)');
    // Frames written while it ran (a starved thread runs slowly) or held back by a reader stay behind.
    const left = result ? result.log - result.checkpointed : 0;
    if (left >= BEHIND_FRAMES !== behind) {
      behind = !behind;
      parentPort.postMessage({ behind });
    }
  } catch (error) {
    // SQLITE_BUSY from another checkpointer (the CLI, a second server) is harmless: the next round catches up.
    if (error?.code !== 'SQLITE_BUSY') parentPort.postMessage({ error: String(error?.message ?? error) });
  }
}

const timer = setInterval(checkpoint, intervalMs);
parentPort.on('message', (message) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  checkpoint();
  database.close();
  parentPort.close();
});

/**
 * Checkpoints run when requests leave the core free: this thread takes the lowest scheduling priority, so
 * that copying WAL pages never preempts the event loop on a busy core (it did, for milliseconds at a time,
 * which was most of the slowest requests' wait). Linux gives each thread its own nice value (setpriority on
 * the thread's id); elsewhere, or where it is refused, the thread keeps the process's. On a core that stays
 * busy, the thread may then fall behind: it says so, and the main connection checkpoints in its own
 * commits, as SQLite does by default, until the thread has caught up.
 */
function lowestPriority() {
  try {
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, 19);
  } catch {
    // Not Linux, or not allowed: the checkpoints run at the process's priority.
  }
}
