import { createPost, listPosts, mutateCreatePost, patchPost, queryPost, queryPosts, readBack, readPost, requestToken, type Loop, type Soak } from './requests.js';
import type { Target } from './target.js';

type Step = (soak: Soak, loop: Loop, target: Target) => Promise<void>;

/** The mix, in percent of a loop's steps: mostly reads, a quarter writes, some token requests. */
export const MIX: readonly { share: number; step: Step; name: string }[] = [
  { share: 16, step: listPosts, name: 'REST list' },
  { share: 22, step: readPost, name: 'REST read' },
  { share: 12, step: createPost, name: 'REST create' },
  { share: 9, step: patchPost, name: 'REST patch' },
  { share: 14, step: queryPosts, name: 'GraphQL list' },
  { share: 13, step: queryPost, name: 'GraphQL read' },
  { share: 5, step: mutateCreatePost, name: 'GraphQL create' },
  { share: 9, step: requestToken, name: 'token' },
];

function pickStep(random: () => number): Step {
  let roll = random() * 100;
  for (const { share, step } of MIX) {
    roll -= share;
    if (roll < 0) return step;
  }
  return MIX.at(-1)!.step;
}

/**
 * Runs every loop until `deadline` (ms since the epoch): each sends one request at a time, alternating
 * between the instances, so that what one instance wrote the next request reads or changes on the other.
 * A request started before the deadline is awaited; none is started after it.
 */
export async function runLoops(soak: Soak, loops: readonly Loop[], deadline: number): Promise<void> {
  await Promise.all(
    loops.map(async (loop) => {
      let turn = loop.index;
      while (Date.now() < deadline) {
        const target = soak.targets[turn++ % soak.targets.length]!;
        await pickStep(soak.random)(soak, loop, target);
      }
    }),
  );
}

/** Reads every acknowledged write back, `concurrency` at a time, alternating instances. */
export async function readAllBack(soak: Soak, loops: readonly Loop[]): Promise<{ found: number; missing: number; stale: number; failed: number; examples: string[] }> {
  const outcome = { found: 0, missing: 0, stale: 0, failed: 0, examples: [] as string[] };
  const entries = [...soak.writes.titles.entries()];
  let next = 0;
  await Promise.all(
    loops.map(async (loop) => {
      while (next < entries.length) {
        const index = next++;
        const [id, title] = entries[index]!;
        const result = await readBack(soak, loop, soak.targets[index % soak.targets.length]!, id, title);
        outcome[result]++;
        if (result !== 'found' && outcome.examples.length < 10) outcome.examples.push(`${id} ("${title}"): ${result}`);
      }
    }),
  );
  return outcome;
}
