import { loadConfigOrExit } from '../config/config.js';
import { openDb } from '../storage/dialect.js';
import { migrateToLatest } from '../storage/migrate.js';

/** `npm run migrate`: applies pending migrations to the configured database and reports them. */
async function main(): Promise<number> {
  const config = loadConfigOrExit();
  const db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    const applied = await migrateToLatest(db);
    console.log(applied.length === 0 ? `${db.dialect}: already up to date` : `${db.dialect}: applied ${applied.join(', ')}`);
    return 0;
  } catch (error) {
    console.error(`migration failed: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  } finally {
    await db.close();
  }
}

process.exitCode = await main();
