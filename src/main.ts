import { buildApp } from './app.js';
import { loadConfigOrExit } from './config/config.js';
import { serveMetrics } from './metrics/metrics.js';

/** `npm start`: validated configuration, the server, and a graceful SIGTERM/SIGINT. */
async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const app = await buildApp(config);
  try {
    await app.fastify.listen({ host: config.host, port: config.port });
  } catch (error) {
    const problem = listenProblem(error, config.host, config.port);
    if (problem === null) throw error;
    console.error(`portcullis: cannot listen on ${config.host}:${config.port}: ${problem}`);
    await app.close();
    process.exit(1);
  }
  const metrics = config.metrics.port === null ? null : await serveMetrics(app.metrics, config.metrics.host, config.metrics.port).catch((error: unknown) => {
    const problem = listenProblem(error, config.metrics.host, config.metrics.port!);
    if (problem === null) throw error;
    console.error(`portcullis: cannot serve metrics on ${config.metrics.host}:${config.metrics.port}: ${problem.replace('PORT', 'METRICS_PORT')}`);
    return app.close().then(() => process.exit(1));
  });
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
}

/** One line an operator can act on, for the failures of listen() that are the configuration's, else null. */
function listenProblem(error: unknown, host: string, port: number): string | null {
  switch ((error as NodeJS.ErrnoException | null)?.code) {
    case 'EADDRINUSE':
      return `port ${port} is already in use; stop what holds it or set PORT to a free port`;
    case 'EACCES':
      return `permission denied for port ${port}; ports below 1024 need privileges, set PORT to 1024 or above`;
    case 'EADDRNOTAVAIL':
      return `${host} is not an address of this machine; set HOST to one of its addresses (or 0.0.0.0)`;
    default:
      return null;
  }
}

await main();
