import type { FastifyBaseLogger } from 'fastify';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Write = (...args: unknown[]) => void;

/** What a request's logger needs of the logger it is a child of. */
export interface ParentLogger {
  isLevelEnabled(level: string): boolean;
  level: string;
}

/**
 * A request's logger, made only once the request logs a line its level lets through. Fastify gives every
 * request a child of the root logger (bound to the request id and, when the caller sent one, its trace id)
 * before any hook runs, and pino makes a child by writing its bindings out as JSON at once: several per cent
 * of the CPU a cached read costs, for requests most of which, below LOG_LEVEL=info, never log a line. This
 * stands in for that child: a line the level drops costs one level check, and the first line it lets
 * through makes the real child (`make`), which then writes that line and every later one. The child's
 * bindings and options are the ones it would have had, so the lines are the same. Its methods are the
 * prototype's: a request costs this object and the function that would make the child. Besides what Fastify
 * asks of a logger, it answers pino's `isLevelEnabled`, `bindings`, `setBindings` and `flush`, so that a
 * plugin using those on a request's logger finds them.
 */
export class LazyChild {
  #made: FastifyBaseLogger | null = null;
  readonly #parent: ParentLogger;
  readonly #make: () => FastifyBaseLogger;

  constructor(parent: ParentLogger, make: () => FastifyBaseLogger) {
    this.#parent = parent;
    this.#make = make;
  }

  /** This, as the logger Fastify and the handlers take it for. */
  static logger(parent: ParentLogger, make: () => FastifyBaseLogger): FastifyBaseLogger {
    return new LazyChild(parent, make) as unknown as FastifyBaseLogger;
  }

  get level(): string {
    return this.#made === null ? this.#parent.level : this.#made.level;
  }

  set level(level: string) {
    this.#child().level = level;
  }

  fatal(...args: unknown[]): void {
    this.#write('fatal', args);
  }

  error(...args: unknown[]): void {
    this.#write('error', args);
  }

  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }

  info(...args: unknown[]): void {
    this.#write('info', args);
  }

  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }

  trace(...args: unknown[]): void {
    this.#write('trace', args);
  }

  silent(): void {}

  isLevelEnabled(level: string): boolean {
    return this.#made === null ? this.#parent.isLevelEnabled(level) : (this.#made as unknown as ParentLogger).isLevelEnabled(level);
  }

  bindings(): Record<string, unknown> {
    return (this.#child() as unknown as { bindings(): Record<string, unknown> }).bindings();
  }

  setBindings(bindings: Record<string, unknown>): void {
    (this.#child() as unknown as { setBindings(bindings: Record<string, unknown>): void }).setBindings(bindings);
  }

  flush(callback?: (error?: Error) => void): void {
    (this.#child() as unknown as { flush(callback?: (error?: Error) => void): void }).flush(callback);
  }

  child(...args: Parameters<FastifyBaseLogger['child']>): FastifyBaseLogger {
    return this.#child().child(...args);
  }

  #child(): FastifyBaseLogger {
    return (this.#made ??= this.#make());
  }

  #write(level: Level, args: unknown[]): void {
    // Once made (or given a level of its own), the child decides; until then the parent's level is the child's.
    if (this.#made !== null) (this.#made[level] as Write)(...args);
    else if (this.#parent.isLevelEnabled(level)) (this.#child()[level] as Write)(...args);
  }
}
