/**
 * Messages to every server process on the same data: the other instances (Redis pub/sub) or the other
 * workers of this instance (node:cluster's IPC through the primary). Delivery is best effort — a message
 * sent while the transport is down is lost — so what is sent only speeds up or extends what each process
 * does on its own; nothing depends on it for correctness.
 */
export interface Fanout {
  /** False when the transport is down and the message was not sent. */
  publish(channel: string, message: string): boolean;
  /** `handler` receives every message on `channel`, the ones this process published included. */
  subscribe(channel: string, handler: (message: string) => void): void;
}
