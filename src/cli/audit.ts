import { setTimeout as sleep } from 'node:timers/promises';
import { verifyAuditChain } from '../audit/verify-chain.js';
import { EXIT_FAILURE, EXIT_OK } from './cli-errors.js';
import { JSON_OPTION, type Command, type CommandContext, type CommandGroup } from './command.js';
import { parseInteger } from './option-values.js';
import { writeJson, writeLine } from './output.js';

const PROBLEMS = {
  hash: 'its fields no longer produce its hash (the event was changed)',
  link: "its prev_hash is not the previous event's hash (an event before it was removed or reordered)",
} as const;

const verifyAuditCommand: Command = {
  name: 'verify',
  summary: 'Check the audit hash chain; names the first broken link',
  options: { json: JSON_OPTION },
  async run({ options }, { db }) {
    const report = await verifyAuditChain(db.kysely);
    if (options.json) writeJson(report);
    else if (report.ok) writeLine(`ok: ${report.events} events`);
    else {
      const { seq, id, problem } = report.brokenAt;
      writeLine(`broken: seq ${seq}, id ${id}, problem ${problem}: ${PROBLEMS[problem]}`);
    }
    return report.ok ? EXIT_OK : EXIT_FAILURE;
  },
};

/** Every stored column: seq and prev_hash let an operator match a line with `audit verify`'s report. */
async function selectEvents(db: CommandContext['db'], afterSeq: number, limit: number) {
  return db.kysely.selectFrom('auditEvents').selectAll().where('seq', '>', afterSeq).orderBy('seq').limit(limit).execute();
}

/**
 * Polls until SIGINT or SIGTERM, or until stdout's reader is gone (`| head`); the caller closes the db.
 * `seq > last` misses nothing because AuditLog extends the chain one writer at a time (a lock on
 * PostgreSQL, SQLite's single writer), so sequence numbers become visible in order.
 */
async function followEvents(db: CommandContext['db'], afterSeq: number): Promise<void> {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    let last = afterSeq;
    while (!stop.signal.aborted && process.stdout.writable) {
      try {
        await sleep(1000, undefined, { signal: stop.signal });
      } catch {
        break; // aborted by a signal
      }
      for (const event of await selectEvents(db, last, 1000)) {
        writeJson(event);
        last = event.seq;
      }
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

const tailAuditCommand: Command = {
  name: 'tail',
  summary: 'Print the latest audit events as JSON lines; --follow keeps printing new ones',
  options: {
    lines: { type: 'string', short: 'n', value: 'N', description: 'how many recent events (default 10)' },
    follow: { type: 'boolean', short: 'f', description: 'poll for new events every second until interrupted' },
  },
  async run({ options }, { db }) {
    // -n 0 --follow prints only what arrives from now on.
    const count = options.lines === undefined ? 10 : parseInteger('lines', options.lines);
    // Fix the newest seq first, so that an event written meanwhile is printed once, by --follow.
    const newest = await db.kysely.selectFrom('auditEvents').select('seq').orderBy('seq', 'desc').limit(1).executeTakeFirst();
    const upTo = newest?.seq ?? 0;
    const latest = await db.kysely.selectFrom('auditEvents').selectAll().where('seq', '<=', upTo).orderBy('seq', 'desc').limit(count).execute();
    for (const event of latest.reverse()) writeJson(event);
    if (options.follow) await followEvents(db, upTo);
    return EXIT_OK;
  },
};

export const auditGroup: CommandGroup = {
  name: 'audit',
  summary: 'Inspect the audit log of access decisions.',
  commands: [verifyAuditCommand, tailAuditCommand],
};
