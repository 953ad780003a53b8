import { randomFillSync } from 'node:crypto';

const RANDOM_BYTES = 10;
// Random bytes are drawn from the CSPRNG 4 KiB at a time: one system call per ~400 ids, not one per id.
const POOL_SIZE = 4090;
const pool = Buffer.alloc(POOL_SIZE);
let poolOffset = POOL_SIZE;

let lastMillis = 0;
// lastMillis in twelve hex digits, written when it changes.
let lastMillisHex = '000000000000';
const lastRandom = Buffer.alloc(RANDOM_BYTES);

/**
 * Opaque, time-ordered identifiers (48-bit millisecond clock + 80 random bits, hex). Monotonic within
 * this process — within one millisecond the random part counts up — so ordering by id is creation order
 * and cursors stay stable while rows are inserted.
 */
export function newId(now: number = Date.now()): string {
  if (now <= lastMillis) {
    now = lastMillis;
    for (let i = RANDOM_BYTES - 1; i >= 0; i--) {
      lastRandom[i] = (lastRandom[i]! + 1) & 0xff;
      if (lastRandom[i] !== 0) break;
    }
  } else {
    if (poolOffset + RANDOM_BYTES > POOL_SIZE) {
      randomFillSync(pool);
      poolOffset = 0;
    }
    pool.copy(lastRandom, 0, poolOffset, poolOffset + RANDOM_BYTES);
    poolOffset += RANDOM_BYTES;
    lastMillis = now;
    // In two 24-bit halves: a millisecond clock is past V8's small integers, and a larger number is
    // written in another radix by the runtime, several times slower.
    lastMillisHex = Math.floor(now / 0x1000000).toString(16).padStart(6, '0') + (now % 0x1000000).toString(16).padStart(6, '0');
  }
  let id = lastMillisHex;
  for (let i = 0; i < RANDOM_BYTES; i++) id += HEX[lastRandom[i]!];
  return id;
}

// Two hex digits per byte value: cheaper than Buffer#toString('hex') for ten bytes.
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

export function nowIso(): string {
  return new Date().toISOString();
}

/**
 * The `updatedAt` a write leaves on a row whose version it read as `replaced`: now, or one millisecond after
 * `replaced` when now is not later. A version check compares `updatedAt`, so two writes in one millisecond
 * must not leave the same one: the second, checking the version both read, would take the row for unchanged
 * and write over the first (a lost update).
 */
export function nextVersion(replaced: string, now = Date.now()): string {
  const after = Date.parse(replaced) + 1;
  return isoTime(Number.isFinite(after) && after > now ? after : now);
}

let isoSecond = Number.NaN;
let isoPrefix = '';

/**
 * `new Date(ms).toISOString()`, formatting the part up to the second once per second: the audit log
 * stamps every request, and V8 formats each Date through printf.
 */
export function isoTime(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== isoSecond) {
    isoSecond = second;
    isoPrefix = new Date(second * 1000).toISOString().slice(0, -4); // "...T12:34:56."
  }
  const millis = ms - second * 1000;
  return `${isoPrefix}${millis < 10 ? '00' : millis < 100 ? '0' : ''}${millis}Z`;
}
