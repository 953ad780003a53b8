import { migrateToLatest } from '../storage/migrate.js';
import { EXIT_OK } from './cli-errors.js';
import type { Command } from './command.js';
import { writeLine } from './output.js';

/** `portcullis migrate` (also `npm run migrate`): applies pending migrations and names them. */
export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'Apply pending database migrations (creates the SQLite database when DATA_DIR has none)',
  options: {},
  managesSchema: true,
  async run(_input, { db }) {
    const applied = await migrateToLatest(db);
    writeLine(applied.length === 0 ? `${db.dialect}: already up to date` : `${db.dialect}: applied ${applied.join(', ')}`);
    return EXIT_OK;
  },
};
