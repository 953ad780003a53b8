import fs from 'node:fs';
import path from 'node:path';
import { sqliteFileIn } from '../storage/dialect.js';
import { BackupTargetExistsError, backupSqlite } from '../storage/sqlite-backup.js';
import { EXIT_OK, UsageError } from './cli-errors.js';
import { JSON_OPTION, type Command } from './command.js';
import { writeJson, writeLine } from './output.js';

/**
 * `portcullis backup FILE`: an online copy of the SQLite database, consistent while servers write (their
 * WAL checkpoints included), restored by putting it in place as DATA_DIR/portcullis.db. PostgreSQL has
 * its own tools for this, which know its server version: pg_dump and pg_restore.
 */
export const backupCommand: Command = {
  name: 'backup',
  summary: 'Copy the SQLite database, while servers run, into a new file (mode 0600); on PostgreSQL, use pg_dump',
  positionals: ['<file>'],
  options: {
    force: { type: 'boolean', description: 'replace the file if it exists' },
    json: JSON_OPTION,
  },
  leavesSchema: true,
  async run({ positionals, options }, { db, config }) {
    if (!db.sqlite) {
      throw new Error(
        'backup copies the embedded SQLite database, and DATABASE_URL names a PostgreSQL one: back it up with pg_dump --format=custom and restore it with pg_restore (README, "Backups and restore")',
      );
    }
    const target = path.resolve(positionals[0]!);
    const directory = path.dirname(target);
    if (!fs.existsSync(directory)) throw new Error(`the directory ${directory} does not exist`);
    const live = fs.realpathSync(sqliteFileIn(config.dataDir));
    const named = path.join(fs.realpathSync(directory), path.basename(target));
    if (named === live || named.startsWith(`${live}-`)) throw new UsageError(`${target} is the database itself (or one of its files); back it up into another file`);
    let result;
    try {
      result = await backupSqlite(db.sqlite, target, { replace: options.force === true });
    } catch (error) {
      if (error instanceof BackupTargetExistsError) throw new UsageError(`${target} exists; pass --force to replace it`);
      throw error;
    }
    if (options.json) writeJson(result);
    else writeLine(`backed up the database to ${result.file} (${result.bytes} bytes, ${result.pages} pages)`);
    return EXIT_OK;
  },
};
