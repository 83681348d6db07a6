import { Partitioners, type Kafka, type KafkaMessage } from 'kafkajs';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { DEAD_LETTER_HEADERS, REDUCED_HEADER, sanitizeHeaders } from './dead-letter';
import { DLQ_HEADER, HEADER, headerText } from '../envelope';
import { REPLAY_HEADER } from './record-context';
import { readToEnd } from './dlq-read';
import { Follow, type OutstandingScope, type StillParked } from './replay-follow';

export { MAX_EARLY_RESENDS, type OutstandingScope, type StillParked, type StillParkedReason } from './replay-follow';

export const DEFAULT_REPLAY_TIMEOUT_MS = 60_000;
/** How long a replay follows the keys it replayed until they are released (ReplayOptions.followMs). */
export const DEFAULT_REPLAY_FOLLOW_MS = 60_000;
/** How many replayed records the report keeps (ReplayReport.sample); every one goes to `onReplayed` as it is sent. */
export const REPLAY_REPORT_SAMPLE = 100;
/**
 * Without a set of wanted ids (`--all`): how many ids a replay remembers to send each event once. An
 * event dead-lettered again further apart than this in the topic is sent twice; the router's inbox
 * skips the second (which `--all` relies on anyway). Bounds the replay's memory, whatever the topic holds.
 */
export const REPLAY_DEDUP_IDS = 100_000;

export interface ReplayOptions {
  kafka: Kafka;
  /** The dead-letter topic, e.g. outbox.dlq.order. */
  dlqTopic: string;
  /**
   * The router consumer this replay is for (with `outstanding`, its consumer). Only its own dead letters
   * (x-consumer) are replayed, and each re-published record names it (x-replay-consumer) so every other
   * consumer of the topic skips it. A dead-letter topic is shared by all consumers of its aggregate type.
   */
  consumer?: string;
  /**
   * Also replay dead letters without x-consumer (written before routers recorded it), which may be
   * another consumer's. With `outstanding` they are taken without it when their id is parked for this
   * consumer (the parked row says this consumer needs the event; the replay reaches only it).
   */
  unattributed?: boolean;
  /** Only dead letters with this record key. */
  key?: string;
  /** Only these event ids (the `id` header). */
  ids?: readonly string[];
  /**
   * Only dead letters still outstanding for this consumer: their ids are in the parked table. Without
   * it (`--all`), every matching dead letter is re-published; the inbox skips those applied since.
   */
  outstanding?: OutstandingScope;
  /**
   * Without `outstanding` (`--all`): dead letters written longer ago than this are left alone
   * (`router.dlqReplayHorizonMs`). An event applied by an earlier replay is recognised only while its
   * inbox row exists, and inbox retention keeps it at least this long after the dead letter was written
   * (docs/operations.md, "Inbox retention"); an older one could be applied twice. Outstanding dead
   * letters are always replayable: the inbox rows of parked events are never pruned.
   */
  horizonMs?: number;
  dryRun?: boolean;
  /**
   * With `outstanding` (and without `ids`): after the dead-letter topic's end, keep reading it for up to
   * this long and replay the new dead letters of the keys this replay replayed, while they are parked,
   * until each key is released (no parked row) or fails again. A key that keeps receiving events gets
   * some parked while its replayed events are on their way (the router keeps a key's order, so an event
   * that arrives before the replayed ones is parked behind them); without this the replay would leave
   * them parked, and with them every later event of the key. 0: one pass only. Default 60 s.
   */
  followMs?: number;
  logger?: Logger;
  /** Gives up when reading the DLQ makes no progress for this long (a broker problem). Default 60 s. */
  timeoutMs?: number;
  /**
   * Each replayed record as it is sent (or would be, dry run), before the next is read: the report keeps
   * only a sample, so a replay of millions stays bounded. Awaited (a writer can wait for its output to drain).
   */
  onReplayed?: (record: ReplayedRecord) => void | Promise<void>;
}

export interface ReplayedRecord {
  id?: string;
  key: string;
  originalTopic: string;
  dlqPartition: number;
  dlqOffset: string;
  errorCode?: string;
}

export interface ReplayReport {
  dlqTopic: string;
  /** The consumer the replay was for. */
  consumer: string;
  scanned: number;
  /** How many dead letters were replayed (or would be, dry run). */
  replayed: number;
  /** The first REPLAY_REPORT_SAMPLE of them; all of them went to `onReplayed`. */
  sample: ReplayedRecord[];
  /** Dead letters without an x-original-topic header: not ours, left alone. */
  withoutOrigin: number;
  /** Matching dead letters of another consumer (x-consumer), left alone. */
  otherConsumer: number;
  /** Matching dead letters without x-consumer (older releases), left alone without `unattributed`. */
  unattributed: number;
  /** Matching dead letters the DLQ took only without their value (x-dead-letter-reduced): not replayable. */
  reduced: number;
  /** Matching dead letters first dead-lettered longer ago than `horizonMs` (x-first-dead-lettered-at, else their timestamp), left alone. */
  beyondHorizon: number;
  /**
   * Following: replayed events that reached the router before their key's head (they came back as
   * KEY_PARKED) and were sent again once they were the head (at most MAX_EARLY_RESENDS times each).
   */
  resent: number;
  /**
   * Keys this replay replayed that are still parked when it returns (a replayed event failed again, an
   * event of the key could not be replayed, or `followMs` ran out); empty when every one was released.
   * Only with `outstanding` and without `ids` (otherwise empty).
   */
  stillParked: string[];
  /** Why each of `stillParked` is still parked, with the key's head and parked rows when the replay returned. */
  stillParkedDetail: StillParked[];
  dryRun: boolean;
}


/**
 * `outbox dlq:replay`: reads a dead-letter topic from its start to the end it has now and re-publishes
 * each matching dead letter AS IT IS READ to its original topic, with its original key, value and
 * headers (the x- headers dropped, `x-replayed-at` and `x-replay-consumer` added; headers sanitized like a
 * dead letter's, so a value kafkajs cannot encode never makes a replay unwritable). Memory stays bounded:
 * no dead letter is held after it was sent, the report keeps counts and a sample (each replayed record
 * goes to `onReplayed`), and the ids that send each event once are the wanted ones (outstanding: the
 * consumer's parked ids) or at most REPLAY_DEDUP_IDS recent ones.
 * Each DLQ partition is read in order and a key's dead letters share a partition, so a key's events
 * come back in the order they failed. The router applies a replayed event through the inbox (once),
 * and a replayed event that is its key's earliest parked one releases it.
 */
export async function replayDeadLetters(options: ReplayOptions): Promise<ReplayReport> {
  const { kafka, dlqTopic } = options;
  const consumer = options.outstanding?.consumer ?? options.consumer;
  if (!consumer || (options.consumer !== undefined && options.consumer !== consumer)) {
    throw new OutboxError(
      'FLAG_INVALID',
      `A replay is for one router consumer: pass consumer (or outstanding.consumer), and the same in both; got ${JSON.stringify(options.consumer)} and ${JSON.stringify(options.outstanding?.consumer)} (--consumer).`,
    );
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_REPLAY_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
    throw new OutboxError('FLAG_INVALID', `The replay read timeout must be a whole number of milliseconds ≥ 1, got ${JSON.stringify(timeoutMs)} (--timeout-ms).`);
  }
  const followMs = options.followMs ?? DEFAULT_REPLAY_FOLLOW_MS;
  if (!Number.isInteger(followMs) || followMs < 0) {
    throw new OutboxError('FLAG_INVALID', `The replay follow time must be a whole number of milliseconds ≥ 0, got ${JSON.stringify(followMs)} (--follow-ms).`);
  }
  const admin = kafka.admin();
  await admin.connect();
  let ends: Map<number, bigint>;
  try {
    const topics = await admin.listTopics();
    if (!topics.includes(dlqTopic)) {
      const dlqs = topics.filter((t) => t.includes('.dlq.')).sort();
      throw new OutboxError('DLQ_TOPIC_MISSING', `The dead-letter topic ${JSON.stringify(dlqTopic)} does not exist. Dead-letter topics here: ${dlqs.length ? dlqs.join(', ') : '(none)'}.`, {
        details: { dlqTopic },
      });
    }
    const offsets = await admin.fetchTopicOffsets(dlqTopic);
    ends = new Map(offsets.filter((o) => BigInt(o.high) > BigInt(o.low)).map((o) => [o.partition, BigInt(o.high)]));
  } finally {
    await admin.disconnect();
  }

  let wanted: Set<string> | undefined = options.ids?.length ? new Set(options.ids.map((id) => id.toLowerCase())) : undefined;
  if (options.outstanding) {
    const { pool, parkedTable, aggregateType } = options.outstanding;
    const { rows } = await pool.query<{ event_id: string }>(
      `SELECT event_id FROM ${parkedTable} WHERE consumer = $1 AND aggregate_type = $2 AND ($3::text IS NULL OR aggregate_id = $3)`,
      [consumer, aggregateType, options.key ?? null],
    );
    const parked = new Set(rows.map((r) => r.event_id));
    wanted = wanted ? new Set([...wanted].filter((id) => parked.has(id))) : parked;
  }

  const report: ReplayReport = {
    dlqTopic,
    consumer,
    scanned: 0,
    replayed: 0,
    sample: [],
    withoutOrigin: 0,
    otherConsumer: 0,
    unattributed: 0,
    reduced: 0,
    beyondHorizon: 0,
    resent: 0,
    stillParked: [],
    stillParkedDetail: [],
    dryRun: Boolean(options.dryRun),
  };
  const horizonStart = options.outstanding || options.horizonMs === undefined ? undefined : Date.now() - options.horizonMs;
  if (ends.size === 0 || (wanted && wanted.size === 0)) return report;
  // With wanted ids, the ones sent are remembered among them (no more than they are); without, a bounded window.
  const seen = wanted ? new Set<string>() : new RecentIds(REPLAY_DEDUP_IDS);
  const takeUnattributed = Boolean(options.unattributed || options.outstanding);

  // One in flight at a time: a key's replays reach its partition in order.
  const producer = options.dryRun ? undefined : kafka.producer({ maxInFlightRequests: 1, allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
  await producer?.connect();
  const at = new Date().toISOString();
  const follow = options.outstanding && !options.ids?.length && !options.dryRun && followMs > 0 ? new Follow(options.outstanding) : undefined;
  const send = async (partition: number, message: KafkaMessage, originalTopic: string, key: string, again = false) => {
    if (producer) {
      const headers = sanitizeHeaders(message.headers, (name) => DEAD_LETTER_HEADERS.test(name));
      headers[REPLAY_HEADER] = at;
      headers[DLQ_HEADER.replayConsumer] = consumer;
      // A letter from before x-first-dead-lettered-at: its own timestamp is the earliest known, and rides on.
      if (headerText(message.headers, DLQ_HEADER.firstDeadLetteredAt) === undefined) headers[DLQ_HEADER.firstDeadLetteredAt] = message.timestamp;
      await producer.send({ topic: originalTopic, acks: -1, messages: [{ key: message.key, value: message.value, headers }] });
    }
    if (again) {
      report.resent++;
      return;
    }
    const record: ReplayedRecord = { id: headerText(message.headers, HEADER.id), key, originalTopic, dlqPartition: partition, dlqOffset: message.offset, errorCode: headerText(message.headers, DLQ_HEADER.errorCode) };
    report.replayed++;
    if (report.sample.length < REPLAY_REPORT_SAMPLE) report.sample.push(record);
    await options.onReplayed?.(record);
  };
  try {
    await readToEnd(kafka, dlqTopic, ends, timeoutMs, async (partition, message) => {
      report.scanned++;
      const originalTopic = headerText(message.headers, DLQ_HEADER.originalTopic);
      if (!originalTopic) {
        report.withoutOrigin++;
        return;
      }
      const key = message.key?.toString('utf8') ?? '';
      const id = headerText(message.headers, HEADER.id)?.toLowerCase();
      if (options.key !== undefined && key !== options.key) return;
      // Another consumer's letter is never ours to replay (nor to follow): its events are applied, or parked, there.
      const letterConsumer = headerText(message.headers, DLQ_HEADER.consumer);
      if (letterConsumer !== undefined && letterConsumer !== consumer) {
        report.otherConsumer++;
        return;
      }
      if (letterConsumer === undefined && !takeUnattributed) {
        report.unattributed++;
        return;
      }
      const pastEnd = BigInt(message.offset) >= (ends.get(partition) ?? 0n);
      if (wanted && (!id || !wanted.has(id))) {
        // Past the end: maybe an event of a key being replayed, parked after the outstanding ids were read.
        if (follow && id && pastEnd) await follow.tail(id, key, message, () => seen.has(id), () => (seen.add(id), send(partition, message, originalTopic, key)));
        return;
      }
      if (horizonStart !== undefined && firstDeadLettered(message) < horizonStart) {
        report.beyondHorizon++;
        return;
      }
      // Its value was refused by the DLQ: nothing to replay (the original is at x-original-offset).
      if (headerText(message.headers, REDUCED_HEADER) !== undefined) {
        report.reduced++;
        follow?.giveUp(key, 'not-replayable', message);
        return;
      }
      // Dead-lettered twice (a replay that failed again): once is enough, at its first place.
      if (id) {
        if (seen.has(id)) {
          // Past the end it was read at: this replay's event went back to the DLQ. KEY_PARKED: it reached
          // the router before its key's head (the key's dead letters are in the DLQ in another order than
          // its parked rows), so it is sent again, behind the head's replay. Anything else: it failed again.
          if (follow && pastEnd && !follow.early(id, key, () => send(partition, message, originalTopic, key, true), message)) follow.giveUp(key, 'failed-again', message);
          return;
        }
        seen.add(id);
      }
      follow?.chase(key);
      await send(partition, message, originalTopic, key);
    }, follow && { done: () => follow.done(), followMs });
  } finally {
    await producer?.disconnect().catch(() => {});
  }
  report.stillParkedDetail = follow ? await follow.stillParked() : [];
  report.stillParked = report.stillParkedDetail.map((k) => k.key);
  for (const k of report.stillParkedDetail) options.logger?.warn({ event: 'dlq.still-parked', dlqTopic, ...k }, `key ${JSON.stringify(k.key)} still parked: ${k.reason}`);
  if (!options.dryRun) options.logger?.info({ event: 'dlq.replayed', dlqTopic, consumer, replayed: report.replayed }, 'dead letters replayed');
  return report;
}

/**
 * When the letter's event was first dead-lettered: x-first-dead-lettered-at, kept by every later dead
 * letter of the event (a parked key's events are dead-lettered again each time they bounce, so the
 * newest letter's timestamp can be long after the event was applied); its timestamp for a letter without it.
 */
function firstDeadLettered(message: KafkaMessage): number {
  const written = Number(message.timestamp);
  const first = Number(headerText(message.headers, DLQ_HEADER.firstDeadLetteredAt));
  return Number.isSafeInteger(first) && first > 0 ? Math.min(first, written) : written;
}

/** The last `capacity` ids added (a Set keeps insertion order: the oldest goes first). */
export class RecentIds {
  private readonly ids = new Set<string>();

  constructor(private readonly capacity: number) {}

  has(id: string): boolean {
    return this.ids.has(id);
  }

  add(id: string): this {
    this.ids.add(id);
    if (this.ids.size > this.capacity) this.ids.delete(this.ids.values().next().value as string);
    return this;
  }

  get size(): number {
    return this.ids.size;
  }
}
