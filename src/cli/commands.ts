import { auditGroup } from './audit.js';
import { backupCommand } from './backup.js';
import { clientsGroup } from './clients.js';
import type { CommandGroup } from './command.js';
import { keysGroup } from './keys.js';
import { migrateCommand } from './migrate.js';
import { usersGroup } from './users.js';

/**
 * Every command of the CLI, in the order help lists them. A group named '' holds top-level commands.
 *
 *   users    create | list | deactivate
 *   clients  create | list | show | rotate-secret | delete
 *   keys     list | rotate | rewrap
 *   audit    verify | checkpoint | archive | tail
 *   migrate | backup
 */
export const COMMAND_GROUPS: readonly CommandGroup[] = [
  usersGroup,
  clientsGroup,
  keysGroup,
  auditGroup,
  { name: '', summary: 'The database: its schema, its backups.', commands: [migrateCommand, backupCommand] },
];
