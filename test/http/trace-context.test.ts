import { describe, expect, it } from 'vitest';
import { traceIdOf } from '../../src/http/trace-context.js';

describe('traceIdOf (W3C Trace Context traceparent)', () => {
  it('reads the trace id of a valid header, a later version by its first four fields', () => {
    expect(traceIdOf('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(traceIdOf('cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more')).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
  });

  it('ignores what a tracer may not continue', () => {
    for (const header of [
      undefined,
      '',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra',
      '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01',
      ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
    ]) {
      expect({ header, traceId: traceIdOf(header) }).toEqual({ header, traceId: null });
    }
  });
});
