import { randomBytes } from 'node:crypto';

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
  const bytes = randomBytes(16);
  bytes.writeUIntBE(lastMs, 0, 6);
  bytes[6] = 0x70 | (counter >> 8); // version 7, counter high bits
  bytes[7] = counter & 0xff;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80; // variant 10
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
