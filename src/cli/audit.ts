import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { archiveAuditEvents } from '../audit/archive.js';
import { auditSigningKey, writeCheckpoint } from '../audit/checkpoints.js';
import { verifyAuditChain } from '../audit/verify-chain.js';
import { EXIT_FAILURE, EXIT_OK, UsageError } from './cli-errors.js';
import { JSON_OPTION, type Command, type CommandContext, type CommandGroup } from './command.js';
import { parseInteger } from './option-values.js';
import { formatCount, writeJson, writeLine } from './output.js';

const verifyAuditCommand: Command = {
  name: 'verify',
  summary: 'Check the audit hash chain against its signed checkpoints; names the first problem',
  options: {
    checkpoint: { type: 'string', value: 'FILE', description: 'a checkpoint kept elsewhere (as `audit checkpoint` printed it)' },
    'key-fingerprint': { type: 'string', value: 'F', description: 'the audit key fingerprint you recorded (write --key-fingerprint=F: it may begin with -); any other signer fails' },
    json: JSON_OPTION,
  },
  async run({ options }, { db }) {
    const report = await verifyAuditChain(db.kysely, {
      ...(options.checkpoint !== undefined ? { checkpoint: readCheckpointFile(String(options.checkpoint)) } : {}),
      ...(options['key-fingerprint'] !== undefined ? { keyFingerprint: String(options['key-fingerprint']) } : {}),
    });
    if (options.json) writeJson(report);
    else if (report.ok) {
      const keys = report.keyFingerprints.length > 0 ? ` signed by ${report.keyFingerprints.join(', ')}` : '';
      const archived = report.archived
        ? `; ${formatCount(report.archived.events, 'earlier event')} archived (up to seq ${report.archived.upToSeq}, archived at ${report.archived.archivedAt})`
        : '';
      const covered = report.checkpoints === 0 ? 'none under a checkpoint yet' : `${report.uncovered} after the newest checkpoint`;
      writeLine(`ok: ${report.events} events, ${formatCount(report.checkpoints, 'checkpoint')}${keys}; ${covered}${archived}`);
    } else {
      const { seq, id, problem } = report.brokenAt;
      const where = seq === null ? '' : `seq ${seq}${id === null ? '' : `, id ${id}`}, `;
      writeLine(`broken: ${where}problem ${problem}: ${report.detail}`);
    }
    return report.ok ? EXIT_OK : EXIT_FAILURE;
  },
};

/** The file `audit checkpoint` wrote: its JSON, or the bare compact JWS. */
function readCheckpointFile(file: string): string {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch (error) {
    throw new UsageError(`cannot read --checkpoint ${file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  if (!text.startsWith('{')) return text;
  const parsed = JSON.parse(text) as { jws?: unknown };
  if (typeof parsed.jws !== 'string') throw new UsageError(`--checkpoint ${file} holds no "jws"`);
  return parsed.jws;
}

const checkpointAuditCommand: Command = {
  name: 'checkpoint',
  summary: 'Sign a checkpoint of the audit chain now and print it (JSON), to keep outside the database',
  options: {},
  async run(_input, { db, config }) {
    const key = await auditSigningKey(db.kysely, config.keyEncryptionSecret, config.previousKeyEncryptionSecret);
    const checkpoint = await writeCheckpoint(db.kysely, key);
    if (!checkpoint) throw new Error('the audit log has no events yet: there is nothing to vouch for');
    writeJson(checkpoint);
    return EXIT_OK;
  },
};

const archiveAuditCommand: Command = {
  name: 'archive',
  summary: 'Export events older than a date (and covered by a signed checkpoint) to a file, then remove them',
  options: {
    before: { type: 'string', value: 'DATE', required: true, description: 'RFC 3339 instant or YYYY-MM-DD (UTC): archive events older than this' },
    out: { type: 'string', value: 'FILE', required: true, description: 'where to write the events (JSON lines; must not exist)' },
    json: JSON_OPTION,
  },
  async run({ options }, { db, config }) {
    const before = Date.parse(String(options.before));
    if (!Number.isFinite(before)) throw new UsageError(`--before: not a date: ${String(options.before)}`);
    const out = String(options.out);
    if (fs.existsSync(out)) throw new UsageError(`--out ${out} exists; archives are never overwritten`);
    const key = await auditSigningKey(db.kysely, config.keyEncryptionSecret, config.previousKeyEncryptionSecret);
    const result = await archiveAuditEvents(db.kysely, key, new Date(before).toISOString(), out);
    if (options.json) writeJson({ ...result, file: result.archived > 0 ? out : null });
    else if (result.archived === 0) writeLine('nothing to archive: no event older than that is covered by a signed checkpoint');
    else writeLine(`archived ${formatCount(result.archived, 'event')} up to seq ${result.upToSeq} to ${out} (vouched for by checkpoint ${result.checkpoint})`);
    return EXIT_OK;
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
  commands: [verifyAuditCommand, checkpointAuditCommand, archiveAuditCommand, tailAuditCommand],
};
