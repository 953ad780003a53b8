import type { Config } from '../config/config.js';
import type { Db } from '../storage/dialect.js';

/** One option as a command declares it: what node:util parseArgs needs, plus what its help shows. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  required?: boolean;
  /** Placeholder in help, e.g. `EMAIL`; string options only. */
  value?: string;
  description: string;
}

/** What a command's `run` receives: its options and positionals, already checked against its spec. */
export interface CommandInput {
  options: Readonly<Record<string, string | boolean | (string | boolean)[] | undefined>>;
  positionals: readonly string[];
}

export interface CommandContext {
  config: Config;
  db: Db;
}

export interface Command {
  /** e.g. `create` in `users create`; the group supplies `users`. */
  name: string;
  summary: string;
  /** Required positionals, named for the usage line, e.g. `<client_id>`. */
  positionals?: readonly string[];
  options: Readonly<Record<string, OptionSpec>>;
  /** Set by `migrate`, which applies migrations itself and reports them, and creates the SQLite file when
   * DATA_DIR has none; every other command needs an existing database, already migrated for it to the
   * latest schema. */
  managesSchema?: boolean;
  /** Set by `backup`, which copies the database as it is: pending migrations are not applied first (a
   * backup taken before an upgrade must not upgrade the database under the servers still running). */
  leavesSchema?: boolean;
  /** Runs with an open, migrated database; returns the exit code. */
  run(input: CommandInput, context: CommandContext): Promise<number>;
}

export interface CommandGroup {
  /** `users`; a group named '' holds top-level commands such as `migrate`. */
  name: string;
  summary: string;
  commands: readonly Command[];
}

/** The `--json` switch, shared by every command that has a machine-readable output. */
export const JSON_OPTION: OptionSpec = { type: 'boolean', description: 'print machine-readable JSON' };
