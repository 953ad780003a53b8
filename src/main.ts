// First: before anything large is loaded (see the module).
import './tick-queue-shapes.js';
import cluster from 'node:cluster';
import type http from 'node:http';
import { AggregatorRegistry } from 'prom-client';
import { buildApp, type App } from './app.js';
import { AuditKeyDecryptionError } from './audit/checkpoints.js';
import { EXIT_CONFIG, EXIT_FAILURE } from './cli/cli-errors.js';
import { KeyDecryptionError } from './oauth/keys/key-encryption.js';
import { runPrimary } from './cluster/primary.js';
import { ConfigError, loadConfigOrExit, type Config } from './config/config.js';
import { listenProblem, metricsListenProblem } from './http/listen-problem.js';
import { serveMetrics } from './metrics/metrics.js';
import { UnknownMigrationsError } from './storage/migrate.js';

/**
 * `npm start`: validated configuration, then either one server process, or (WORKERS > 1) a primary that
 * supervises WORKERS of them on the one port (cluster/primary.ts); a graceful SIGTERM/SIGINT either way.
 */
async function main(): Promise<void> {
  const config = loadConfigOrExit();
  if (config.workers > 1 && cluster.isPrimary) return runPrimary(config);
  await serve(config);
}

async function serve(config: Config): Promise<void> {
  let app: App;
  try {
    app = await buildApp(config);
  } catch (error) {
    // A KEY_ENCRYPTION_SECRET that opens none of the stored keys: a configuration error, said in one line.
    if (error instanceof KeyDecryptionError || error instanceof AuditKeyDecryptionError) {
      console.error(`portcullis: ${error.message}`);
      process.exit(EXIT_CONFIG);
    }
    // A setting that only the opened database shows to be wrong (MAX_TOKEN_LENGTH against its keys and scopes).
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(EXIT_CONFIG);
    }
    // A database a newer version migrated (a rollback): said in one line, the database left as it is.
    if (error instanceof UnknownMigrationsError) {
      console.error(`portcullis: ${error.message}`);
      process.exit(EXIT_FAILURE);
    }
    throw error;
  }
  try {
    await app.fastify.listen({ host: config.host, port: config.port });
  } catch (error) {
    const problem = listenProblem(error, config.host, config.port);
    if (problem === null) throw error;
    console.error(`portcullis: cannot listen on ${config.host}:${config.port}: ${problem}`);
    await app.close();
    process.exit(1);
  }
  let metrics: http.Server | null = null;
  if (cluster.isWorker) {
    // The primary serves METRICS_PORT and asks every worker for this registry; prom-client answers it from
    // a worker once an aggregator registry exists there.
    new AggregatorRegistry();
    AggregatorRegistry.setRegistries([app.metrics.registry]);
  } else if (config.metrics.port !== null) {
    metrics = await serveMetrics(app.metrics.registry, config.metrics.host, config.metrics.port).catch(async (error: unknown) => {
      const problem = metricsListenProblem(error, config.metrics.host, config.metrics.port!);
      if (problem === null) throw error;
      console.error(`portcullis: ${problem}`);
      await app.close();
      process.exit(1);
    });
  }
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.fastify.log.info({ signal }, 'server.draining');
    metrics?.close();
    app
      .close()
      .then(() => process.exit(0))
      .catch((error: unknown) => {
        app.fastify.log.error({ err: error }, 'server.close_failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // A worker whose primary is gone (killed) would hold the port's connections with no one supervising.
  if (cluster.isWorker) process.on('disconnect', () => shutdown('disconnect'));
}

await main();
