import { KEY_REFRESH_MS, type KeyStore } from './key-store.js';

export interface RotationLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * Every server, at start and every KEY_REFRESH_MS: re-reads the keys (so every process holds a new key long
 * before it signs) and rotates them when SIGNING_KEY_ROTATION_DAYS says so (KeyStore.rotateIfDue: one
 * rotation however many servers try at once). The timer does not keep the process alive; `stop()` waits
 * for a run in progress.
 */
export function startKeyRotation(keys: KeyStore, logger: RotationLogger, intervalMs = KEY_REFRESH_MS): { stop(): Promise<void> } {
  let running: Promise<void> | null = null;
  const run = () => {
    if (running) return;
    running = keys
      .rotateIfDue()
      .then((rotation) => {
        if (rotation) logger.info(rotation, 'keys.rotated');
      })
      .catch((error: unknown) => logger.error({ err: error }, 'keys.rotation_failed'))
      .finally(() => (running = null));
  };
  // A server that was stopped past the rotation date rotates as it starts.
  run();
  const timer = setInterval(run, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
