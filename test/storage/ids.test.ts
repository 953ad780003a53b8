import { describe, expect, it } from 'vitest';
import { isoTime, newId } from '../../src/storage/ids.js';

describe('ids and timestamps', () => {
  it('formats times exactly as Date#toISOString, across second, day and year boundaries', () => {
    const samples = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 86_399_999, 86_400_000, Date.UTC(2026, 11, 31, 23, 59, 59, 999), Date.UTC(2027, 0, 1)];
    for (let i = 0; i < 2000; i++) samples.push(Math.floor(Math.random() * 4_102_444_800_000)); // up to 2100
    for (const ms of [...samples, ...samples.map((ms) => ms + 1)]) expect(isoTime(ms)).toBe(new Date(ms).toISOString());
  });

  it('makes ids that sort in creation order, also within one millisecond', () => {
    const ids = Array.from({ length: 1000 }, () => newId(1_795_000_000_000));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids[0]).toMatch(/^[0-9a-f]{32}$/);
    expect(newId(1_795_000_000_001) > ids.at(-1)!).toBe(true);
  });

  it('starts an id with the millisecond clock in twelve hex digits, across the 24-bit halves it is written in', () => {
    // Later instants each time: the clock part of an id never goes back within a process.
    const step = 0x1000000;
    const base = Math.ceil(1_796_000_000_000 / step) * step;
    for (const at of [base - 1, base, base + 1, base + step - 1, base + step, 0x7fffffffffff]) {
      const id = newId(at);
      expect(id).toMatch(/^[0-9a-f]{32}$/);
      expect(id.slice(0, 12)).toBe(at.toString(16).padStart(12, '0'));
    }
    // A clock that went back is held at the last millisecond used.
    expect(newId(1000).slice(0, 12)).toBe((0x7fffffffffff).toString(16));
  });
});
