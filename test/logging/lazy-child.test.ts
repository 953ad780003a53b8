import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import { LazyChild } from '../../src/logging/lazy-child.js';

/** A pino logger at `level` writing its lines (parsed) into `lines`, and how many children it made. */
function rootLogger(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const root = pino({ level, base: undefined, timestamp: false }, stream);
  let children = 0;
  const make = (bindings: Record<string, unknown>, options?: object) => () => {
    children++;
    return root.child(bindings, options) as never;
  };
  return { root, lines, make, children: () => children };
}

const flushed = () => new Promise((resolve) => setImmediate(resolve));

describe('a request logger made on its first line', () => {
  it('makes no child for lines its level drops, and writes the first line it lets through with the bindings', async () => {
    const { root, lines, make, children } = rootLogger('warn');
    const log = LazyChild.logger(root, make({ reqId: 'r1', traceId: 't1' }));
    log.info({ req: 'x' }, 'incoming request');
    log.debug('detail');
    log.trace('more detail');
    log.silent('never');
    expect(children()).toBe(0);
    expect(log.level).toBe('warn');
    log.warn({ code: 7 }, 'something odd');
    log.error(new Error('broken'), 'request failed');
    log.info('still dropped');
    await flushed();
    expect(children()).toBe(1);
    expect(lines.map(({ level, msg, reqId, traceId, code }) => ({ level, msg, reqId, traceId, code }))).toEqual([
      { level: 40, msg: 'something odd', reqId: 'r1', traceId: 't1', code: 7 },
      { level: 50, msg: 'request failed', reqId: 'r1', traceId: 't1', code: undefined },
    ]);
    expect(lines[1]!.err).toMatchObject({ type: 'Error', message: 'broken' });
  });

  it('writes every line an info logger lets through, as the child itself would', async () => {
    const lazy = rootLogger('info');
    const eager = rootLogger('info');
    const log = LazyChild.logger(lazy.root, lazy.make({ reqId: 'r2' }));
    const child = eager.root.child({ reqId: 'r2' });
    for (const logger of [log, child as unknown as typeof log]) {
      logger.info({ res: { statusCode: 200 } }, 'request completed');
      logger.fatal('down');
      logger.debug('dropped');
    }
    await flushed();
    expect(lazy.lines).toEqual(eager.lines);
    expect(lazy.lines).toHaveLength(2);
  });

  it("answers pino's isLevelEnabled, bindings, setBindings and flush as the child would", async () => {
    const { root, lines, make, children } = rootLogger('warn');
    const log = LazyChild.logger(root, make({ reqId: 'r4' })) as unknown as Logger;
    expect([log.isLevelEnabled('info'), log.isLevelEnabled('warn')]).toEqual([false, true]);
    expect(children()).toBe(0);
    expect(log.bindings()).toEqual({ reqId: 'r4' });
    log.setBindings({ user: 'u1' });
    log.warn('bound');
    await new Promise<void>((resolve) => log.flush(() => resolve()));
    await flushed();
    expect(children()).toBe(1);
    expect(lines.map(({ msg, reqId, user }) => ({ msg, reqId, user }))).toEqual([{ msg: 'bound', reqId: 'r4', user: 'u1' }]);
  });

  it('hands out a child of its child, and follows a level set on it', async () => {
    const { root, lines, make, children } = rootLogger('warn');
    const log = LazyChild.logger(root, make({ reqId: 'r3' }));
    const grandchild = log.child({ part: 'resolver' }) as Logger;
    expect(children()).toBe(1);
    grandchild.warn('from below');
    log.level = 'debug';
    expect(log.level).toBe('debug');
    log.debug('now written');
    await flushed();
    expect(lines.map(({ msg, reqId, part }) => ({ msg, reqId, part }))).toEqual([
      { msg: 'from below', reqId: 'r3', part: 'resolver' },
      { msg: 'now written', reqId: 'r3', part: undefined },
    ]);
  });
});
