import cluster, { type Worker } from 'node:cluster';
import pino from 'pino';
import { AggregatorRegistry } from 'prom-client';
import type { Config } from '../config/config.js';
import { metricsListenProblem } from '../http/listen-problem.js';
import { logDestination } from '../logging/log-destination.js';
import { serveMetrics } from '../metrics/metrics.js';
import { serveCounters } from './cluster-counters.js';
import { relayFanout } from './cluster-fanout.js';

/** A worker that dies is replaced; more than this many deaths within a minute means something is wrong. */
const MAX_RESTARTS_PER_MINUTE = 5;

/**
 * WORKERS > 1: this process only supervises. The workers (this same program, started by node:cluster) serve
 * the one port, which the primary holds and hands connections to in turn. The first worker starts alone —
 * it migrates the database, creates the bootstrap admin and the signing keys on a first start — and the
 * others once it listens, so no two workers race to prepare one database. Without Redis, the primary also
 * keeps the workers' rate-limit counters and relays their events and invalidation notices; with it, the
 * workers share those through Redis like separate instances. Metrics of all workers are served summed on
 * METRICS_PORT. SIGTERM or SIGINT drains every worker and exits 0 once all have exited cleanly.
 */
export async function runPrimary(config: Config): Promise<void> {
  const log = pino({ level: config.logLevel }, logDestination());
  if (!config.redisUrl) {
    serveCounters(cluster);
    relayFanout(cluster);
  }
  // Served before any worker starts, so that a port in use stops the start like PORT's does.
  const metrics =
    config.metrics.port === null
      ? null
      : await serveMetrics(new AggregatorRegistry(), config.metrics.host, config.metrics.port, (registry) => registry.clusterMetrics()).catch(
          (error: unknown) => {
            const problem = metricsListenProblem(error, config.metrics.host, config.metrics.port!);
            if (problem === null) throw error;
            console.error(`portcullis: ${problem}`);
            process.exit(1);
          },
        );
  let stopping = false;
  let failed = false;
  const restarts: number[] = [];

  const first = cluster.fork();
  const firstCode = await new Promise<number | null>((resolve) => {
    first.once('listening', () => resolve(null));
    first.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
  if (firstCode !== null) {
    // It could not start (a bad configuration, a port in use): it said why; the others would fail alike.
    process.exit(firstCode === 0 ? 1 : firstCode);
  }
  for (let i = 1; i < config.workers; i++) cluster.fork();
  log.info({ workers: config.workers }, 'cluster.started');

  const exitWhenAllStopped = () => {
    if (Object.keys(cluster.workers ?? {}).length > 0) return;
    metrics?.close();
    log.info({ failed }, 'cluster.stopped');
    process.exit(failed ? 1 : 0);
  };

  cluster.on('exit', (worker: Worker, code: number | null, signal: string | null) => {
    if (stopping) {
      if (code !== 0) failed = true;
      exitWhenAllStopped();
      return;
    }
    const now = Date.now();
    restarts.push(now);
    while (restarts.length > 0 && restarts[0]! < now - 60_000) restarts.shift();
    if (restarts.length > MAX_RESTARTS_PER_MINUTE) {
      log.error({ worker: worker.process.pid, code, signal }, 'cluster.giving_up: workers keep exiting; stopping');
      failed = true;
      stop();
      return;
    }
    log.warn({ worker: worker.process.pid, code, signal }, 'cluster.worker_replaced');
    cluster.fork();
  });

  const stop = () => {
    if (stopping) return;
    stopping = true;
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    exitWhenAllStopped();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
