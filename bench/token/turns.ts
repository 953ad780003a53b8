/**
 * Servers measured in turns: after each one's warm-up, the measured time is cut into slices and the
 * servers take them in turns, the order alternating from slice to slice. A shared machine's speed changes
 * within seconds; slices taken in turns let every server meet the same changes, so that their ratio holds
 * even when the absolute figures drift.
 */
import { cpuMillis, median } from '../processes.js';
import type { Load } from './token-load.js';

export interface Contender {
  /** The server process, for its CPU time. */
  pid: number;
  /** A fresh load for one slice (refresh chains are spent by a slice, so each gets its own). */
  prepare(): Promise<Load>;
}

export interface Measurement {
  tokensPerSecond: number;
  /** Medians over the slices. */
  p50: number;
  p99: number;
  cpuMicrosPerToken: number;
  errors: number;
}

export interface Turns {
  warmupSeconds: number;
  seconds: number;
  slices: number;
}

interface Slice {
  tokens: number;
  cpuMillis: number;
  p50: number;
  p99: number;
  errors: number;
}

/** Measures `contenders` in the given order (alternated slice by slice); results in the same order. */
export async function measureInTurns(contenders: Contender[], turns: Turns): Promise<Measurement[]> {
  for (const contender of contenders) await (await contender.prepare())(turns.warmupSeconds);
  const slices: Slice[][] = contenders.map(() => []);
  const indexes = contenders.map((_, index) => index);
  for (let slice = 0; slice < turns.slices; slice++) {
    for (const index of slice % 2 === 0 ? indexes : [...indexes].reverse()) {
      slices[index]!.push(await runSlice(contenders[index]!, turns.seconds / turns.slices));
    }
  }
  return slices.map((taken) => combine(taken, turns.seconds));
}

async function runSlice(contender: Contender, seconds: number): Promise<Slice> {
  const load = await contender.prepare();
  const cpuBefore = cpuMillis(contender.pid);
  const result = await load(seconds);
  return { tokens: result.tokens, cpuMillis: cpuMillis(contender.pid) - cpuBefore, p50: result.p50, p99: result.p99, errors: result.errors };
}

function combine(slices: Slice[], seconds: number): Measurement {
  const tokens = slices.reduce((sum, slice) => sum + slice.tokens, 0);
  const cpu = slices.reduce((sum, slice) => sum + slice.cpuMillis, 0);
  return {
    tokensPerSecond: Math.round(tokens / seconds),
    p50: median(slices.map((slice) => slice.p50)),
    p99: median(slices.map((slice) => slice.p99)),
    cpuMicrosPerToken: Math.round((cpu * 1000) / Math.max(1, tokens)),
    errors: slices.reduce((sum, slice) => sum + slice.errors, 0),
  };
}
