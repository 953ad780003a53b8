import { loadConfigOrExit } from '../config/config.js';
import { openDb } from '../storage/dialect.js';
import { migrateToLatest } from '../storage/migrate.js';
import type { CommandContext } from './command.js';

/**
 * Runs `use` against the configured database and closes it on every path, so a PostgreSQL pool never
 * keeps the process alive after an error. Configuration problems exit 78 here, before anything opens.
 * Pending migrations are applied first, as the server does at start, so the CLI works on a fresh DATA_DIR.
 */
export async function withDatabase<T>(options: { migrate: boolean }, use: (context: CommandContext) => Promise<T>): Promise<T> {
  const config = loadConfigOrExit();
  const db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    if (options.migrate) await migrateToLatest(db);
    return await use({ config, db });
  } finally {
    await db.close();
  }
}
