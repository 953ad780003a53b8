import type { CollectedMemory } from './collected-memory.js';
import { residentMiB } from './instances.js';

/** How far above its reading after the warm-up a reading at the end may be. */
export const GROWTH_TOLERANCE = 0.1;

export const MEMORY_RULE =
  `memory stops growing: right after a full collection, resident memory and the live heap at the end are ` +
  `each at most ${GROWTH_TOLERANCE * 100}% above what they were after the warm-up`;

export interface MemoryFigures {
  /** Resident memory sampled every second over the whole load, and how many samples the warm-up took. */
  samples: number;
  warmupSamples: number;
  first: number;
  peak: number;
  last: number;
  /** Over the measured load: the first half's peak minus its first sample. */
  firstHalfGrowth: number;
  /** The second half's peak minus the first half's. */
  secondHalfGrowth: number;
  /** Read right after a full collection: before the load, after the warm-up, at the end. */
  collected: readonly (CollectedMemory | null)[];
  stopsGrowing: boolean;
}

/** Samples each process's resident memory every `intervalMs` until stopped; `measure()` marks the warm-up's end. */
export class MemorySampler {
  readonly samples = new Map<string, number[]>();
  warmupSamples = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(private readonly processes: readonly { name: string; pid: number }[]) {
    for (const { name } of processes) this.samples.set(name, []);
  }

  start(intervalMs: number): void {
    this.sample();
    this.#timer = setInterval(() => this.sample(), intervalMs);
  }

  sample(): void {
    for (const { name, pid } of this.processes) {
      const mib = residentMiB(pid);
      if (mib !== null) this.samples.get(name)!.push(mib);
    }
  }

  measure(): void {
    this.sample();
    this.warmupSamples = Math.min(...[...this.samples.values()].map((samples) => samples.length - 1));
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.sample();
  }
}

/**
 * A process's memory over the load. Sampled resident memory is reported, not judged: V8 lets garbage
 * build up in its old generation between full collections (tens of seconds apart at this load, the heap
 * limit raised as the allocation rate asks), so it climbs and falls back by a hundred MiB with the live heap
 * flat, and one 60 s window may hold a climb and no fall. The readings after a full collection are judged.
 */
export function judgeMemory(samples: readonly number[], warmupSamples: number, collected: readonly (CollectedMemory | null)[]): MemoryFigures | null {
  const measured = samples.slice(warmupSamples);
  if (measured.length < 2) return null;
  const half = Math.floor(measured.length / 2);
  const firstHalfPeak = Math.max(...measured.slice(0, half));
  const [, afterWarmup, atEnd] = collected;
  const within = (end: number, start: number) => end <= start * (1 + GROWTH_TOLERANCE);
  return {
    samples: samples.length,
    warmupSamples,
    first: samples[0]!,
    peak: Math.max(...samples),
    last: samples.at(-1)!,
    firstHalfGrowth: firstHalfPeak - measured[0]!,
    secondHalfGrowth: Math.max(...measured.slice(half)) - firstHalfPeak,
    collected,
    stopsGrowing: !!afterWarmup && !!atEnd && within(atEnd.rss, afterWarmup.rss) && within(atEnd.heapUsed, afterWarmup.heapUsed),
  };
}
