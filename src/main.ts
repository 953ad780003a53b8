import { buildApp } from './app.js';
import { loadConfigOrExit } from './config/config.js';

/** `npm start`: validated configuration, the server, and a graceful SIGTERM/SIGINT. */
async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const app = await buildApp(config);
  await app.fastify.listen({ host: config.host, port: config.port });
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.fastify.log.info({ signal }, 'server.draining');
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

await main();
