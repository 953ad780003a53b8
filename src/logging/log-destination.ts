import pino from 'pino';

let destination: pino.DestinationStream | null = null;

/**
 * Standard output, written asynchronously: under load, log lines written while one write is in flight go
 * out together in the next, instead of one blocking `write` per line (three per request at `info`). pino
 * flushes what is pending when the process exits. One per process, shared by every app in it.
 */
export function logDestination(): pino.DestinationStream {
  destination ??= pino.destination({ dest: 1, sync: false });
  return destination;
}
