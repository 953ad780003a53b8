// Runs in a worker thread, so it is plain JavaScript: the thread has no TypeScript loader of its own.
// See wal-checkpointer.ts for why checkpoints run here.
import { parentPort, workerData } from 'node:worker_threads';
import { createRequire } from 'node:module';

const SQLite = createRequire(import.meta.url)('better-sqlite3');
const { file, intervalMs } = workerData;

const database = new SQLite(file);
database.pragma('busy_timeout = 1000');

function checkpoint() {
  try {
    // PASSIVE copies what it can without waiting for, or blocking, readers and writers.
    database.pragma('wal_checkpoint(PASSIVE)');
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
