import { randomUUID } from 'node:crypto';
import { Partitioners, type Kafka, type KafkaMessage } from 'kafkajs';
import type { Pool } from 'pg';
import { OutboxError } from '../errors';
import { sleep } from '../retry';
import type { Logger } from '../log';
import { DEAD_LETTER_HEADERS, REDUCED_HEADER, sanitizeHeaders } from './dead-letter';
import { DLQ_HEADER, HEADER, headerText } from '../envelope';
import { REPLAY_HEADER } from './record-context';

export const DEFAULT_REPLAY_TIMEOUT_MS = 60_000;
/** How long a replay follows the keys it replayed until they are released (ReplayOptions.followMs). */
export const DEFAULT_REPLAY_FOLLOW_MS = 60_000;
/** How often a following replay checks whether its keys are released. */
const FOLLOW_POLL_MS = 200;
/** How often a following replay sends again one event that reached the router before its key's head. */
export const MAX_EARLY_RESENDS = 5;

export interface ReplayOptions {
  kafka: Kafka;
  /** The dead-letter topic, e.g. outbox.dlq.order. */
  dlqTopic: string;
  /** Only dead letters with this record key. */
  key?: string;
  /** Only these event ids (the `id` header). */
  ids?: readonly string[];
  /**
   * Only dead letters still outstanding for this consumer: their ids are in the parked table. Without
   * it (`--all`), every matching dead letter is re-published; the inbox skips those applied since.
   */
  outstanding?: { pool: Pool; parkedTable: string; consumer: string; aggregateType: string };
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
  scanned: number;
  replayed: ReplayedRecord[];
  /** Dead letters without an x-original-topic header: not ours, left alone. */
  withoutOrigin: number;
  /** Matching dead letters the DLQ took only without their value (x-dead-letter-reduced): not replayable. */
  reduced: number;
  /** Matching dead letters older than `horizonMs`, left alone. */
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
 * Why a replay left a key parked:
 * - `failed-again`: one of this replay's events came back to the dead-letter topic (`eventId`, `errorCode`);
 * - `new-failure`: a new dead letter of the key that is not a KEY_PARKED one (a new failure of the key);
 * - `not-replayable`: a dead letter of the key was kept without its value (x-dead-letter-reduced);
 * - `follow-timeout`: `followMs` ran out while the router was still applying the key's events.
 */
export type StillParkedReason = 'failed-again' | 'new-failure' | 'not-replayable' | 'follow-timeout';

export interface StillParked {
  key: string;
  reason: StillParkedReason;
  /** The dead letter that made the replay give up on the key (not for follow-timeout). */
  eventId?: string;
  errorCode?: string;
  /** The key's earliest parked event and its parked rows, read when the replay returned. */
  head?: string;
  parkedRows: number;
}

/**
 * `outbox dlq:replay`: reads a dead-letter topic from its start to the end it has now and re-publishes
 * each matching dead letter AS IT IS READ to its original topic, with its original key, value and
 * headers (the x- headers dropped, `x-replayed-at` added; headers sanitized like a dead letter's, so a
 * value kafkajs cannot encode never makes a replay unwritable). Memory stays bounded: no dead letter is
 * held after it was sent, only the ids seen (to send each once) and the report's one line per replay.
 * Each DLQ partition is read in order and a key's dead letters share a partition, so a key's events
 * come back in the order they failed. The router applies a replayed event through the inbox (once),
 * and a replayed event that is its key's earliest parked one releases it.
 */
export async function replayDeadLetters(options: ReplayOptions): Promise<ReplayReport> {
  const { kafka, dlqTopic } = options;
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
    const { pool, parkedTable, consumer, aggregateType } = options.outstanding;
    const { rows } = await pool.query<{ event_id: string }>(
      `SELECT event_id FROM ${parkedTable} WHERE consumer = $1 AND aggregate_type = $2 AND ($3::text IS NULL OR aggregate_id = $3)`,
      [consumer, aggregateType, options.key ?? null],
    );
    const parked = new Set(rows.map((r) => r.event_id));
    wanted = wanted ? new Set([...wanted].filter((id) => parked.has(id))) : parked;
  }

  const report: ReplayReport = { dlqTopic, scanned: 0, replayed: [], withoutOrigin: 0, reduced: 0, beyondHorizon: 0, resent: 0, stillParked: [], stillParkedDetail: [], dryRun: Boolean(options.dryRun) };
  const horizonStart = options.outstanding || options.horizonMs === undefined ? undefined : Date.now() - options.horizonMs;
  if (ends.size === 0 || (wanted && wanted.size === 0)) return report;

  // One in flight at a time: a key's replays reach its partition in order.
  const producer = options.dryRun ? undefined : kafka.producer({ maxInFlightRequests: 1, allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
  await producer?.connect();
  const seen = new Set<string>();
  const at = new Date().toISOString();
  const follow = options.outstanding && !options.ids?.length && !options.dryRun && followMs > 0 ? new Follow(options.outstanding) : undefined;
  const send = async (partition: number, message: KafkaMessage, originalTopic: string, key: string, again = false) => {
    if (producer) {
      const headers = sanitizeHeaders(message.headers, (name) => DEAD_LETTER_HEADERS.test(name));
      headers[REPLAY_HEADER] = at;
      await producer.send({ topic: originalTopic, acks: -1, messages: [{ key: message.key, value: message.value, headers }] });
    }
    if (again) {
      report.resent++;
      return;
    }
    report.replayed.push({ id: headerText(message.headers, HEADER.id), key, originalTopic, dlqPartition: partition, dlqOffset: message.offset, errorCode: headerText(message.headers, DLQ_HEADER.errorCode) });
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
      const pastEnd = BigInt(message.offset) >= (ends.get(partition) ?? 0n);
      if (wanted && (!id || !wanted.has(id))) {
        // Past the end: maybe an event of a key being replayed, parked after the outstanding ids were read.
        if (follow && id && pastEnd) await follow.tail(id, key, message, () => seen.has(id), () => (seen.add(id), send(partition, message, originalTopic, key)));
        return;
      }
      if (horizonStart !== undefined && Number(message.timestamp) < horizonStart) {
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
  if (!options.dryRun) options.logger?.info({ event: 'dlq.replayed', dlqTopic, replayed: report.replayed.length }, 'dead letters replayed');
  return report;
}

/**
 * With `outstanding`: the keys a replay replayed, followed past the dead-letter topic's end until each
 * is released. The router parks an event of a key that arrives while the key's replayed events are on
 * their way (behind them, to keep the key's order): its dead letter (KEY_PARKED) comes after the end
 * the replay read to, so the replay re-publishes it too, and the key is released once the router
 * catches up. A key is given up on (left parked, reported) when one of this replay's events comes back
 * to the DLQ (it failed again), a new failure of the key is dead-lettered, or a letter of it cannot be
 * replayed.
 */
class Follow {
  private readonly chased = new Set<string>();
  private readonly given = new Map<string, Pick<StillParked, 'reason' | 'eventId' | 'errorCode'>>();
  private readonly resends = new Map<string, number>();
  /** Per key: this replay's events that came back before their key's head, by lower-case id, waiting to be sent again. */
  private readonly waiting = new Map<string, Map<string, () => Promise<void>>>();

  constructor(private readonly o: NonNullable<ReplayOptions['outstanding']>) {}

  chase(key: string): void {
    if (!this.given.has(key)) this.chased.add(key);
  }

  /** The first reason a key was given up on is the one reported. */
  giveUp(key: string, reason: StillParkedReason, letter: KafkaMessage): void {
    this.chased.delete(key);
    this.waiting.delete(key);
    if (!this.given.has(key)) this.given.set(key, { reason, eventId: headerText(letter.headers, HEADER.id), errorCode: headerText(letter.headers, DLQ_HEADER.errorCode) });
  }

  /** A dead letter not among the outstanding ids read at the start: replayed when it is a parked event of a followed key. */
  async tail(id: string, key: string, message: KafkaMessage, seen: () => boolean, replay: () => Promise<void>): Promise<void> {
    if (!this.chased.has(key)) return;
    if (seen()) return this.giveUp(key, 'failed-again', message);
    if (headerText(message.headers, REDUCED_HEADER) !== undefined) return this.giveUp(key, 'not-replayable', message);
    if (headerText(message.headers, DLQ_HEADER.errorCode) !== 'KEY_PARKED') return this.giveUp(key, 'new-failure', message);
    // The router writes the dead letter, then the parked row: wait a moment for the row.
    for (let i = 0; i < 40; i++) {
      if (await this.parked(key, id)) return replay();
      await sleep(50);
    }
  }

  /**
   * One of this replay's events came back. If only because it reached the router before its key's head
   * (KEY_PARKED) and it was sent again fewer than MAX_EARLY_RESENDS times, it waits (true) until it is
   * the key's head, and `done()` sends it then (`resend`), behind the events before it. False: it failed
   * again.
   */
  early(id: string, key: string, resend: () => Promise<void>, letter: KafkaMessage): boolean {
    if (!this.chased.has(key) || headerText(letter.headers, DLQ_HEADER.errorCode) !== 'KEY_PARKED') return false;
    const n = this.resends.get(id) ?? 0;
    if (n >= MAX_EARLY_RESENDS) return false;
    this.resends.set(id, n + 1);
    const waiting = this.waiting.get(key) ?? new Map<string, () => Promise<void>>();
    waiting.set(id.toLowerCase(), resend);
    this.waiting.set(key, waiting);
    return true;
  }

  /** Sends the waiting events that are their key's head now, drops the released keys; true when no followed key is left. */
  async done(): Promise<boolean> {
    if (this.chased.size === 0) return true;
    const heads = await this.heads([...this.chased]);
    for (const key of [...this.chased]) {
      const head = heads.get(key);
      if (head === undefined) {
        this.chased.delete(key);
        this.waiting.delete(key);
        continue;
      }
      const resend = this.waiting.get(key)?.get(head);
      if (resend) {
        this.waiting.get(key)?.delete(head);
        await resend();
      }
    }
    return this.chased.size === 0;
  }

  /** Each key's earliest parked event (lower case), for the keys that have one. */
  private async heads(keys: string[]): Promise<Map<string, string>> {
    const { rows } = await this.o.pool.query<{ aggregate_id: string; event_id: string }>(
      `SELECT DISTINCT ON (aggregate_id) aggregate_id, lower(event_id) AS event_id FROM ${this.o.parkedTable}
        WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = ANY($3::text[]) ORDER BY aggregate_id, seq`,
      [this.o.consumer, this.o.aggregateType, keys],
    );
    return new Map(rows.map((r) => [r.aggregate_id, r.event_id]));
  }

  async stillParked(): Promise<StillParked[]> {
    const keys = [...this.chased, ...this.given.keys()];
    if (keys.length === 0) return [];
    const { rows } = await this.o.pool.query<{ aggregate_id: string; head: string; parked: number }>(
      `SELECT aggregate_id, (array_agg(event_id ORDER BY seq))[1] AS head, count(*)::int AS parked FROM ${this.o.parkedTable}
        WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = ANY($3::text[]) GROUP BY aggregate_id ORDER BY aggregate_id`,
      [this.o.consumer, this.o.aggregateType, keys],
    );
    return rows.map((r) => ({
      key: r.aggregate_id,
      ...(this.given.get(r.aggregate_id) ?? { reason: 'follow-timeout' as const }),
      head: r.head,
      parkedRows: r.parked,
    }));
  }

  private async parked(key: string, id: string): Promise<boolean> {
    const { rows } = await this.o.pool.query(`SELECT 1 FROM ${this.o.parkedTable} WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 AND event_id IN ($4, lower($4))`, [
      this.o.consumer,
      this.o.aggregateType,
      key,
      id,
    ]);
    return rows.length > 0;
  }
}

/**
 * Reads each partition from its start up to the end recorded before reading (new dead letters wait for
 * the next replay), handing each record to `each` in partition order before fetching more. Gives up
 * (DLQ_UNAVAILABLE) when no record arrived for `timeoutMs`: a broker problem, not a large topic.
 *
 * With `follow`, it goes on past those ends once every partition reached its end, handing on the new
 * records too, until `follow.done()` (checked every FOLLOW_POLL_MS) or `followMs` has passed.
 *
 * The consumer is only disconnected once `run()` has returned, i.e. its group join finished or crashed:
 * kafkajs's `stop()` does nothing to a runner still joining, so a disconnect during the join would let
 * the join go on over closed connections, crash with a retriable error and be restarted by kafkajs (a
 * consumer left running after the replay returned). And once the replay is closing, a crash is never
 * restarted (`restartOnFailure`); before that, kafkajs restarts a retriable crash as usual.
 */
async function readToEnd(
  kafka: Kafka,
  topic: string,
  ends: Map<number, bigint>,
  timeoutMs: number,
  each: (partition: number, message: KafkaMessage) => Promise<void>,
  follow?: { done(): Promise<boolean>; followMs: number },
): Promise<void> {
  const groupId = `outbox-dlq-replay-${randomUUID()}`;
  let closing = false;
  // read_committed, as the router reads (the dead-letter topic is written without transactions today).
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100, readUncommitted: false, retry: { retries: 5, restartOnFailure: async () => !closing } });
  const remaining = new Set(ends.keys());
  let running: Promise<void> | undefined;
  let poller: NodeJS.Timeout | undefined;
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let failed = false;
      let finished = false;
      const fail = (error: unknown) => {
        failed = true;
        clearTimeout(timer);
        clearTimeout(poller);
        reject(error);
      };
      const finish = () => {
        finished = true;
        clearTimeout(timer);
        clearTimeout(poller);
        resolve();
      };
      const arm = () => {
        clearTimeout(timer);
        if (remaining.size === 0) return; // following: waiting for new records is no broker problem
        timer = setTimeout(
          () => fail(new OutboxError('DLQ_UNAVAILABLE', `Reading ${topic} made no progress for ${timeoutMs} ms (--timeout-ms); check the brokers (outbox status).`, { retriable: true })),
          timeoutMs,
        );
      };
      const reachedEnds = () => {
        if (!follow) return finish();
        clearTimeout(timer);
        const until = Date.now() + follow.followMs;
        const poll = () => {
          poller = setTimeout(() => {
            follow
              .done()
              .then((done) => (failed || finished ? undefined : done || Date.now() >= until ? finish() : poll()))
              .catch(fail);
          }, FOLLOW_POLL_MS);
        };
        poll();
      };
      arm();
      running = consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch, heartbeat }) => {
          const end = ends.get(batch.partition) ?? (follow ? 0n : undefined);
          if (end === undefined || failed || finished || (!follow && !remaining.has(batch.partition))) return;
          arm();
          try {
            for (const message of batch.messages) {
              // Following, records past the end are handed on too: kafkajs would not fetch them again.
              if (BigInt(message.offset) >= end && !follow) break;
              await each(batch.partition, message);
              if (failed || finished) return;
              arm();
              await heartbeat();
            }
          } catch (error) {
            fail(error);
            return;
          }
          if (!remaining.has(batch.partition)) return;
          // Non-transactional topic: offsets are dense, so reaching end - 1 means everything before was read.
          if (BigInt(batch.messages.at(-1)?.offset ?? '-1') >= end - 1n) remaining.delete(batch.partition);
          if (remaining.size === 0) reachedEnds();
        },
      });
      running.catch(fail);
    });
  } finally {
    closing = true;
    clearTimeout(poller);
    await running?.catch(() => {});
    await consumer.disconnect().catch(() => {});
    const admin = kafka.admin();
    await admin
      .connect()
      .then(() => admin.deleteGroups([groupId]))
      .catch(() => {})
      .finally(() => admin.disconnect().catch(() => {}));
  }
}
