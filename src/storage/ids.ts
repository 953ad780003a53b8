import { randomFillSync } from 'node:crypto';

// Random bytes are drawn from the CSPRNG 4 KiB at a time: one system call per ~400 ids, not one per id.
const POOL_SIZE = 4096;
const pool = Buffer.alloc(POOL_SIZE);
let poolOffset = POOL_SIZE;

function randomTen(): Buffer {
  if (poolOffset + 10 > POOL_SIZE) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const bytes = Buffer.from(pool.subarray(poolOffset, poolOffset + 10));
  poolOffset += 10;
  return bytes;
}

let lastMillis = 0;
let lastRandom: Buffer = Buffer.alloc(10);

/**
 * Opaque, time-ordered identifiers (48-bit millisecond clock + 80 random bits, hex). Monotonic within
 * this process, so ordering by id is creation order and cursors stay stable while rows are inserted.
 */
export function newId(now: number = Date.now()): string {
  let random: Buffer;
  if (now <= lastMillis) {
    now = lastMillis;
    random = Buffer.from(lastRandom);
    for (let i = random.length - 1; i >= 0; i--) {
      random[i] = (random[i]! + 1) & 0xff;
      if (random[i] !== 0) break;
    }
  } else {
    random = randomTen();
  }
  lastMillis = now;
  lastRandom = random;
  return now.toString(16).padStart(12, '0') + random.toString('hex');
}

export function nowIso(): string {
  return new Date().toISOString();
}
