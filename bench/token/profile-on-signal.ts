/**
 * Preloaded (`--import`) into a bench server: SIGUSR2 starts V8's sampling profiler, the next SIGUSR2 stops
 * it and writes the profile to BENCH_CPU_PROFILE. Only the measured
 * window is sampled — not start-up, migrations or the warm-up — and the server itself is unchanged.
 */
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';

const file = process.env.BENCH_CPU_PROFILE;
if (!file) throw new Error('BENCH_CPU_PROFILE names the file the profile is written to');
/** Microseconds between samples: fine enough for stages of a few microseconds over a few seconds. */
const INTERVAL_US = Number(process.env.BENCH_CPU_PROFILE_INTERVAL ?? 100);

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: INTERVAL_US });
let running = false;
process.on('SIGUSR2', () => {
  running = !running;
  if (running) {
    void session.post('Profiler.start');
    return;
  }
  void session.post('Profiler.stop').then(({ profile }) => {
    // Written aside, then renamed: whoever waits for the file never reads half of it.
    fs.writeFileSync(`${file}.partial`, JSON.stringify(profile));
    fs.renameSync(`${file}.partial`, file);
  });
});
