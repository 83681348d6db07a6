import { randomFillSync } from 'node:crypto';

/** Last timestamp and counter: ids from this process increase strictly, also within one millisecond. */
let lastMs = -1;
let counter = 0;

/**
 * A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, a 12-bit counter in `rand_a` (RFC 9562 §6.2, method 1),
 * then random bits. Time-ordered ids append to the right edge of the outbox's primary-key B-tree instead
 * of touching a random page per insert, which keeps index writes and WAL down on the business path.
 *
 * Monotonic within the process, so ids sort like the events were written, also within one millisecond
 * (the relay itself orders by the outbox's `seq` column, assigned at insert; see docs/relay.md).
 * A clock that steps back keeps the last timestamp; a counter overflow (4,096 ids in one ms) borrows
 * the next millisecond.
 */
export function uuidv7(now: number = Date.now()): string {
  if (now > lastMs) {
    lastMs = now;
    counter = 0;
  } else if (++counter > 0xfff) {
    lastMs++;
    counter = 0;
  }
  const bytes = Buffer.allocUnsafe(16);
  randomInto(bytes);
  bytes.writeUIntBE(lastMs, 0, 6);
  bytes[6] = 0x70 | (counter >> 8); // version 7, counter high bits
  bytes[7] = counter & 0xff;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80; // variant 10
  let out = '';
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) out += '-';
    out += HEX[bytes[i] as number];
  }
  return out;
}

/** Two hex digits per byte value. */
const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

/**
 * Random bytes from the CSPRNG, taken 4 KiB at a time: one randomFillSync per 256 ids instead of one
 * per id (it was the writer's largest JavaScript cost in a CPU profile of a writer loop). Each byte is
 * handed out once.
 */
const POOL = Buffer.alloc(4096);
let poolOffset = POOL.length;

function randomInto(target: Buffer): void {
  if (poolOffset + target.length > POOL.length) {
    randomFillSync(POOL);
    poolOffset = 0;
  }
  POOL.copy(target, 0, poolOffset, poolOffset + target.length);
  poolOffset += target.length;
}
