import type { AuditFigures } from './database.js';
import type { CollectedMemory } from './collected-memory.js';
import { MEMORY_RULE, type MemoryFigures } from './memory.js';
import { KINDS, percentile, STATUS_CLASSES, type Tally } from './tally.js';
import type { Writes } from './writes.js';

export interface Outcome {
  seconds: number;
  instances: readonly string[];
  tally: Tally;
  /** Requests sent during the load itself (the token requests before it and the read-back excluded). */
  loadRequests: number;
  cpuSeconds: Record<string, number>;
  writes: Writes;
  readBack: { found: number; missing: number; stale: number; failed: number; examples: string[] };
  seeds: number;
  postsStored: number;
  audit: AuditFigures;
  verify: Record<string, unknown>;
  memory: Record<string, MemoryFigures | null>;
  /** Resident memory in MiB, one sample a second from the load's start. */
  samples: Record<string, readonly number[]>;
  exitCodes: Record<string, number | null>;
}

function table(header: readonly string[], rows: readonly (readonly (string | number | null)[])[]): void {
  console.log(`| ${header.join(' | ')} |`);
  console.log(`|${header.map(() => '---').join('|')}|`);
  for (const row of rows) console.log(`| ${row.map((cell) => (cell === null ? '-' : String(cell))).join(' | ')} |`);
}

const mib = (value: number) => value.toFixed(1);

/** Prints the figures; returns the criteria that failed (none: the soak passed). */
export function report(outcome: Outcome): string[] {
  const { tally, writes, readBack, audit, instances } = outcome;

  console.log("\nRequests with the load's credentials, from its first tokens to the read-back (latency from sending to the last byte of the answer, ms)\n");
  const rows = KINDS.map((kind) => {
    const row = tally.rows.get(kind)!;
    const total = [...row.byInstance.values()].reduce((a, b) => a + b, 0);
    const perSecond = kind.startsWith('read-back') ? null : (total / outcome.seconds).toFixed(1);
    return [kind, ...instances.map((name) => row.byInstance.get(name) ?? 0), total, perSecond, percentile(row.latencies, 0.5), percentile(row.latencies, 0.99), ...STATUS_CLASSES.map((c) => row.byClass[c])];
  });
  const all = KINDS.flatMap((kind) => tally.rows.get(kind)!.latencies);
  rows.push(['all', ...instances.map(() => ''), tally.total(), null, percentile(all, 0.5), percentile(all, 0.99), ...STATUS_CLASSES.map((c) => tally.count(c))]);
  table(['kind', ...instances, 'total', 'req/s', 'p50', 'p99', ...STATUS_CLASSES], rows);
  console.log(
    `\nload (warm-up included): ${outcome.loadRequests} requests in ${outcome.seconds.toFixed(1)} s = ${(outcome.loadRequests / outcome.seconds).toFixed(0)} req/s; ` +
      `server CPU ${instances.map((name) => `${name} ${outcome.cpuSeconds[name]!.toFixed(1)} s`).join(', ')}; ` +
      `429s ${tally.rateLimited}; unexpected answers ${tally.unexpected}`,
  );
  for (const example of tally.examples) console.log(`  e.g. ${example}`);

  const acknowledged = writes.titles.size;
  console.log(
    `\nwrites: ${writes.creates} creates acknowledged (${acknowledged} distinct posts), ${writes.patches} PATCHes, ` +
      `${writes.replays} repeated Idempotency-Keys (${writes.replayMismatches} answered another post)`,
  );
  console.log(`read back: ${readBack.found} as written, ${readBack.missing} missing, ${readBack.stale} with another title, ${readBack.failed} unanswered`);
  for (const example of readBack.examples) console.log(`  e.g. ${example}`);
  const unacknowledged = outcome.postsStored - outcome.seeds - acknowledged;
  console.log(`posts stored: ${outcome.postsStored} = ${outcome.seeds} before the load + ${acknowledged} acknowledged${unacknowledged === 0 ? '' : ` + ${unacknowledged} no request was told of`}`);

  const loadRecorded = [...audit.byRequest.values()].reduce((a, b) => a + b, 0) + audit.withoutRequestId;
  const expected = tally.expectedDecisions();
  let missingRequests = 0;
  let short = 0;
  for (const [requestId, decisions] of tally.decisions) {
    const recorded = audit.byRequest.get(requestId) ?? 0;
    if (recorded === 0) missingRequests++;
    else if (recorded < decisions) short++;
  }
  let unknownRequests = 0;
  for (const requestId of audit.byRequest.keys()) if (!tally.decisions.has(requestId)) unknownRequests++;
  console.log(
    `\naudit: ${expected} decisions owed by ${tally.decisions.size} answered requests of the load's clients ` +
      `(REST and token: 1 each; GraphQL: 1 per root field), ${loadRecorded} recorded for them ` +
      `(${missingRequests} requests with none, ${short} with fewer, ${unknownRequests} request ids the load did not count as answered, ` +
      `${audit.withoutRequestId} without a request id, ${audit.denials} denials)`,
  );
  console.log(
    `audit chain: ${audit.rows} events (${audit.aggregatedRows} aggregated) standing for ${audit.decisions} decisions in all; ` +
      `audit verify: ${outcome.verify.ok === true ? `ok (${String(outcome.verify.events)} events, ${String(outcome.verify.checkpoints)} checkpoints)` : `FAILED ${JSON.stringify(outcome.verify)}`}`,
  );

  console.log(`\nMemory (MiB): resident sampled every second from the load's start; after a full collection, resident / live heap`);
  console.log(`before the load, after the warm-up and just before the load ends. Rule: ${MEMORY_RULE}.\n`);
  const collected = (reading: CollectedMemory | null) => (reading === null ? '-' : `${mib(reading.rss)} / ${mib(reading.heapUsed)}`);
  table(
    ['instance', 'samples (warm-up)', 'first', 'peak', 'last', 'growth, 1st half', 'growth, 2nd half', 'collected: before', 'after warm-up', 'at the end', 'stops growing'],
    instances.map((name) => {
      const m = outcome.memory[name];
      if (!m) return [name, 0, null, null, null, null, null, null, null, null, 'no samples'];
      return [name, `${m.samples} (${m.warmupSamples})`, mib(m.first), mib(m.peak), mib(m.last), mib(m.firstHalfGrowth), mib(m.secondHalfGrowth), ...m.collected.map(collected), m.stopsGrowing ? 'yes' : 'NO'];
    }),
  );
  for (const name of instances) {
    const samples = outcome.samples[name] ?? [];
    const warmup = outcome.memory[name]?.warmupSamples ?? -1;
    const step = Math.max(1, Math.round(samples.length / 15));
    const shown = samples.flatMap((value, i) => (i % step === 0 || i === samples.length - 1 || i === warmup ? [`${i === warmup ? '| ' : ''}${value.toFixed(0)}`] : []));
    console.log(`${name}, resident every ${step} s (| where the warm-up ends): ${shown.join(' ')}`);
  }
  console.log(`\ninstances stopped with SIGTERM: ${instances.map((name) => `${name} exit ${outcome.exitCodes[name] ?? 'killed'}`).join(', ')}`);

  const criteria: [string, boolean][] = [
    ['no 5xx', tally.count('5xx') === 0],
    ['every request answered', tally.count('no answer') === 0],
    ['every answer as expected (no 4xx, 429 or GraphQL error)', tally.unexpected === 0 && tally.withoutRequestId === 0],
    ['no lost write (every acknowledged post read back as last written)', readBack.missing + readBack.stale + readBack.failed === 0 && writes.replayMismatches === 0],
    ['no write that was not acknowledged', unacknowledged === 0],
    ['every decision in the audit chain', loadRecorded === expected && missingRequests + short + unknownRequests === 0 && audit.denials === 0],
    ['audit verify ok', outcome.verify.ok === true],
    ['memory stops growing', instances.every((name) => outcome.memory[name]?.stopsGrowing === true)],
    ['instances exit 0 on SIGTERM', instances.every((name) => outcome.exitCodes[name] === 0)],
  ];
  console.log('');
  for (const [name, met] of criteria) console.log(`${met ? 'pass' : 'FAIL'}  ${name}`);
  return criteria.filter(([, met]) => !met).map(([name]) => name);
}
