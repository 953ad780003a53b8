import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { SqliteHandle } from './sqlite-handle.js';

export interface SqliteBackupResult {
  file: string;
  pages: number;
  bytes: number;
}

/** The target exists and replacing it was not asked for. */
export class BackupTargetExistsError extends Error {
  constructor(readonly file: string) {
    super(`${file} exists`);
    this.name = 'BackupTargetExistsError';
  }
}

/**
 * Backs the embedded database up into `target` with SQLite's online backup, while servers keep writing.
 * The copy holds password digests and encrypted keys: it is made in a new file of mode 0600 beside the
 * target and renamed onto it once complete, so the target is never a partial copy and never readable by
 * others. Without `replace`, the target's name is claimed first (an exclusive create), so an existing
 * file is never overwritten, even one made meanwhile.
 */
export async function backupSqlite(handle: SqliteHandle, target: string, options: { replace: boolean }): Promise<SqliteBackupResult> {
  const file = path.resolve(target);
  const partial = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(6).toString('hex')}.partial`);
  let claimed = false;
  if (!options.replace) {
    try {
      fs.closeSync(fs.openSync(file, 'wx', 0o600));
      claimed = true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new BackupTargetExistsError(file);
      throw error;
    }
  }
  let pages: number;
  try {
    fs.closeSync(fs.openSync(partial, 'wx', 0o600));
    pages = await handle.backup(partial);
    fs.renameSync(partial, file);
  } catch (error) {
    fs.rmSync(partial, { force: true });
    if (claimed) fs.rmSync(file, { force: true });
    throw error;
  }
  return { file, pages, bytes: fs.statSync(file).size };
}
