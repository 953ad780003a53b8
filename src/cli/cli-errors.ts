/**
 * Exit codes follow sysexits(3) where one fits: 2 is the shell's usage error, 78 is EX_CONFIG (an invalid
 * setting, written by loadConfigOrExit, or a DATA_DIR without a database). Anything else that stops a command — a duplicate, a missing row, a broken audit
 * chain, an unreachable database — is 1.
 */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;
export const EXIT_CONFIG = 78;

/** The command line itself is wrong: unknown command or option, missing or invalid value. */
export class UsageError extends Error {
  constructor(
    message: string,
    /** The command whose help the hint points to, e.g. `users create`; by default the one being run. */
    readonly helpFor?: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}
