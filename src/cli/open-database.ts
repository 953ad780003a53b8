import fs from 'node:fs';
import { ConfigError, loadConfigOrExit } from '../config/config.js';
import { openDb, sqliteFileIn } from '../storage/dialect.js';
import { migrateToLatest } from '../storage/migrate.js';
import type { CommandContext } from './command.js';

/**
 * Runs `use` against the configured database and closes it on every path, so a PostgreSQL pool never
 * keeps the process alive after an error. Configuration problems exit 78 here, before anything opens.
 * Pending migrations are applied first, as the server does at start. Only a command that creates the
 * database (`migrate`) may start from a DATA_DIR without one: any other command there would be working
 * on a new, empty database, most likely because DATA_DIR is mistyped, and reporting that it found nothing.
 */
export async function withDatabase<T>(options: { migrate: boolean; create: boolean }, use: (context: CommandContext) => Promise<T>): Promise<T> {
  const config = loadConfigOrExit();
  if (config.databaseUrl === null && !options.create) {
    const file = sqliteFileIn(config.dataDir);
    if (!fs.existsSync(file)) {
      throw new ConfigError([
        `DATA_DIR: there is no database at ${file}; set DATA_DIR to the server's data directory (or DATABASE_URL for PostgreSQL), or run 'portcullis migrate' to create a new database there`,
      ]);
    }
  }
  const db = await openDb({ databaseUrl: config.databaseUrl, poolSize: config.databasePoolSize, dataDir: config.dataDir });
  try {
    if (options.migrate) await migrateToLatest(db);
    return await use({ config, db });
  } finally {
    await db.close();
  }
}
