// Runs in a worker thread, so it is plain JavaScript: the thread has no TypeScript loader of its own.
// See wal-checkpointer.ts for why checkpoints run here.
import { parentPort, workerData } from 'node:worker_threads';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';

const SQLite = createRequire(import.meta.url)('better-sqlite3');
const { file, intervalMs, journalSizeLimit, slowHoldMs } = workerData;

/**
 * How far below the event loop's this thread's scheduling priority is, in `nice` steps. On a core the event
 * loop shares with this thread (a process pinned to one core, or more workers than cores), a checkpoint ran
 * for up to 5 ms at a time while the event loop waited with requests in hand. Ten steps below, the kernel
 * gives the core back to the event loop when it wakes, and still lets this thread have about a tenth of a
 * busy core; saturated, its checkpoints took about 2 % of the core and kept up (measured). At 19 it got too
 * little and fell behind. Work it does holding the write lock (catchUp, startWalOver) is stretched as much
 * on a busy core, which is why that work is kept small: a bounded copy, and the syncs, which wait for the disk.
 */
const NICE = 10;

yieldToRequests();

const database = new SQLite(file);
// Never waits for a lock: a PASSIVE checkpoint does not anyway, and the WAL is started over only when no
// writer is busy (a writer that is would start it over itself).
database.pragma('busy_timeout = 0');
// The connection that starts the WAL over truncates it back to this size: usually this one, below.
database.pragma(`journal_size_limit = ${journalSizeLimit}`);
const begin = database.prepare('begin immediate');
const commit = database.prepare('commit');
const rollback = database.prepare('rollback');

// As sqlite-write-lock.ts's isBusy (this thread cannot import TypeScript): SQLITE_BUSY and its extended codes.
const isBusy = (error) => typeof error?.code === 'string' && error.code.startsWith('SQLITE_BUSY');

/**
 * Once a checkpoint has copied the whole WAL, the next commit writes the WAL from its beginning again, and
 * SQLite syncs the WAL's new header before that commit's frames (so that a crash cannot mix the old log's
 * frames with the new). That commit would be a request's, on a server's event loop, with the write lock
 * held throughout; on a disk busy with other writes that fsync has taken over 100 ms. Made here instead: a
 * commit that rewrites page 1 as it is (the user version set to itself) starts the WAL over in this
 * thread, and the servers' next commits append after it. Not always: while a reader is still on the old
 * WAL this commit only appends, and once a round has copied this lone frame too (nothing else written in
 * between) it is not made again — so after a pause, and then, a server's commit starts the WAL over.
 */
function startWalOver() {
  try {
    begin.run();
  } catch (error) {
    if (isBusy(error)) return false;
    throw error;
  }
  try {
    const version = database.pragma('user_version', { simple: true });
    database.pragma(`user_version = ${Number(version)}`);
    commit.run();
    return true;
  } catch (error) {
    if (database.inTransaction) rollback.run();
    throw error;
  }
}

/** Bytes of one WAL frame: a page and its 24-byte header. */
const frameBytes = Number(database.pragma('page_size', { simple: true })) + 24;

/**
 * The most frames a RESTART checkpoint copies while it holds the write lock (about 4 MB): when a PASSIVE
 * round leaves more behind, the next round copies them without the lock first.
 */
const CATCH_UP_FRAMES = 1000;

/**
 * Under a steady write load the WAL is rarely started over: a PASSIVE round almost always ends with a commit
 * behind it, or a commit comes between the round and the commit that would start the WAL over, and then the
 * WAL grows by every commit until writes pause (measured: 17 MB a second at 12,000 requests a second, 42 MB
 * saturated; gigabytes in minutes). Once it holds more than `journal_size_limit`, the rest is copied with
 * writers held off: RESTART takes the write lock (not while a writer holds it: busy_timeout is 0, so the
 * next round tries again), syncs the WAL, copies the frames the PASSIVE round left (at most
 * CATCH_UP_FRAMES), syncs the database file and leaves the WAL to be started over by the next commit, made
 * here at once (or a server's, should it come first). Meanwhile the servers' writes wait for the lock
 * without blocking their event loops (sqlite-write-lock.ts): for as long as those two syncs take, which on
 * a disk busy with other writes has been tens of milliseconds, and their audit events wait in memory.
 */
function catchUp() {
  const [{ busy, log, checkpointed }] = database.pragma('wal_checkpoint(RESTART)');
  if (busy !== 0) return false;
  if (checkpointed === log) startWalOver();
  return true;
}

/**
 * Runs `hold` (true when it took the write lock) and tells the server when this thread held the lock for
 * longer than `slowHoldMs`: its writes waited that long.
 */
function timed(kind, hold) {
  const started = performance.now();
  if (!hold()) return;
  const heldMs = performance.now() - started;
  if (heldMs > slowHoldMs) parentPort.postMessage({ slowHold: { kind, heldMs: Math.round(heldMs) } });
}

function checkpoint(startOver) {
  try {
    // PASSIVE copies what it can without waiting for, or blocking, readers and writers.
    const [{ busy, log, checkpointed }] = database.pragma('wal_checkpoint(PASSIVE)');
    if (!startOver || busy !== 0 || log <= 1) return;
    if (journalSizeLimit > 0 && log * frameBytes > journalSizeLimit) {
      if (log - checkpointed <= CATCH_UP_FRAMES) timed('catch-up', catchUp);
    } else if (checkpointed === log) {
      // Everything copied: start the WAL over (not when all it holds is the one frame of the last start).
      timed('start-over', startWalOver);
    }
  } catch (error) {
    // SQLITE_BUSY from another checkpointer (the CLI, a second server) is harmless: the next round catches up.
    if (!isBusy(error)) parentPort.postMessage({ error: String(error?.message ?? error) });
  }
}

const timer = setInterval(() => checkpoint(true), intervalMs);
parentPort.on('message', (message) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  checkpoint(false);
  database.close();
  parentPort.close();
});

/**
 * Linux gives each thread its own nice value (setpriority on the thread's id, read from /proc when /proc is
 * this process's); elsewhere, or where it is refused, the thread keeps the process's priority. Relative to
 * the process's: a server started at nice 5 runs its checkpoints at 15.
 */
function yieldToRequests() {
  try {
    if (fs.readlinkSync('/proc/self') !== String(process.pid)) return;
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, Math.min(19, os.getPriority(tid) + NICE));
  } catch {
    // Not Linux, or not allowed: the checkpoints run at the process's priority.
  }
}
