/**
 * Reads a V8 CPU profile (the `.cpuprofile` JSON) and charges each sample to one stage: the stage of the
 * innermost frame on its stack that a stage rule names (so the SHA-256 under client authentication counts
 * as the digest, not as authentication), else the component of its leaf frame (Kysely, SQLite, Fastify,
 * Node's HTTP, GC). Work resumed after an `await` has lost its caller's frames, so it lands in a
 * component rather than in the stage that awaited it.
 */
export interface CpuProfile {
  nodes: { id: number; callFrame: CallFrame; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

export interface CallFrame {
  functionName: string;
  url: string;
}

export interface Rule {
  name: string;
  matches(frame: CallFrame): boolean;
}

export interface Charged {
  name: string;
  /** Microseconds of samples charged to it. */
  micros: number;
}

const IDLE = '(idle)';
const OTHER = 'other';
/** Samples of the profiler's own stop (it builds the profile inside the window): not the server's work. */
const PROFILER = (frame: CallFrame) => frame.url === 'node:inspector';

/** Stage rules are tried on every frame from the leaf up; component rules on the leaf only. */
export interface Charges {
  charged: Charged[];
  /** Every sample but idle ones and the profiler's own. */
  busyMicros: number;
  /** The leaf functions of what no rule named, most first: what a new rule should cover. */
  unnamed: Charged[];
}

export function chargeSamples(profile: CpuProfile, stages: readonly Rule[], components: readonly Rule[]): Charges {
  const parent = new Map<number, number>();
  const frames = new Map<number, CallFrame>();
  for (const node of profile.nodes) {
    frames.set(node.id, node.callFrame);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  // One classification per node: every sample on the same stack is charged the same way.
  const byNode = new Map<number, string>();
  const classify = (id: number): string => {
    const leaf = frames.get(id)!;
    if (leaf.functionName === IDLE) return IDLE;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) if (PROFILER(frames.get(at)!)) return IDLE;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const stage = stages.find((rule) => rule.matches(frames.get(at!)!));
      if (stage) return stage.name;
    }
    return components.find((rule) => rule.matches(leaf))?.name ?? OTHER;
  };
  const totals = new Map<string, number>();
  const unnamed = new Map<string, number>();
  let busyMicros = 0;
  profile.samples.forEach((id, index) => {
    let name = byNode.get(id);
    if (name === undefined) byNode.set(id, (name = classify(id)));
    // V8 records the time since the previous sample; it is the best estimate of each sample's share.
    const micros = profile.timeDeltas[index] ?? 0;
    if (name === IDLE) return;
    busyMicros += micros;
    totals.set(name, (totals.get(name) ?? 0) + micros);
    if (name === OTHER) {
      const { functionName, url } = frames.get(id)!;
      const leaf = `${functionName || '(anonymous)'} ${url.replace(/^.*node_modules\//, '')}`;
      unnamed.set(leaf, (unnamed.get(leaf) ?? 0) + micros);
    }
  });
  return { charged: sorted(totals), busyMicros, unnamed: sorted(unnamed) };
}

function sorted(totals: Map<string, number>): Charged[] {
  return [...totals].map(([name, micros]) => ({ name, micros })).sort((a, b) => b.micros - a.micros);
}
