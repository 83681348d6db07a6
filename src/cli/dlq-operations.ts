import type { OutboxConfig } from '../config';
import { createPool, qualified } from '../db';
import { OutboxError } from '../errors';
import { createKafka } from '../kafka';
import type { Logger } from '../log';
import { parkedTableName } from '../provision/sql-files';
import { sleep } from '../retry';
import { topicNames } from '../topics';
import { consumerName, parkedAgain, releaseKeys, replayDeadLetters, type ReplayedRecord, type ReplayReport } from '../router';

/**
 * The bodies of `dlq:replay` and `dlq:release`, shared by the CLI commands and `outbox console`'s
 * actions, so a replay or a release from the page is the same code as the one from a terminal. Each
 * opens what it needs and closes it again; the callers only format the result.
 */

export interface DlqTarget {
  aggregateType?: string;
  topic?: string;
}

/** `--aggregate-type order` → outbox.dlq.order, or `--topic` as given; the aggregate type for the parked table. */
export function target(opts: DlqTarget, config: OutboxConfig): { dlqTopic: string; aggregateType: string } {
  if (!opts.aggregateType && !opts.topic) {
    throw new OutboxError('FLAG_INVALID', 'Say which dead letters: --aggregate-type <type> (reads outbox.dlq.<type>) or --topic <dead-letter topic>.');
  }
  const names = topicNames(config.connector.topicReplacement);
  const aggregateType = opts.aggregateType ?? names.aggregateTypeOfDlq(opts.topic as string);
  const dlqTopic = opts.topic ?? names.dlqFor(names.routed(aggregateType));
  return { dlqTopic, aggregateType };
}

/** The router's parked-keys table, schema-qualified. */
export function parkedTable(config: OutboxConfig): string {
  return qualified(config.outbox.schema, parkedTableName(config.outbox.inboxTable));
}

export interface ReplayRequest extends DlqTarget {
  key?: string;
  ids?: string[];
  consumer?: string;
  /** Every matching dead letter, not only the consumer's outstanding ones (`--all`). */
  all: boolean;
  beyondHorizon: boolean;
  unattributed: boolean;
  dryRun: boolean;
  timeoutMs: number;
  followMs: number;
}

export interface ReplayOutcome {
  dlqTopic: string;
  aggregateType: string;
  consumer: string;
  report: ReplayReport;
}

/** `dlq:replay`: resolves the topic and the consumer, then replays (replayDeadLetters) with the consumer's outstanding scope unless `all`. */
export async function runDlqReplay(config: OutboxConfig, request: ReplayRequest, options: { logger?: Logger; onReplayed?: (record: ReplayedRecord) => void | Promise<void> } = {}): Promise<ReplayOutcome> {
  const { dlqTopic, aggregateType } = target(request, config);
  const consumer = consumerName(config, request.consumer ?? config.router.consumer);
  const pool = createPool(config.database, { max: 1, application_name: 'outbox-dlq-replay' });
  try {
    const report = await replayDeadLetters({
      kafka: createKafka(config, { role: 'dlq-replay', logger: options.logger }),
      dlqTopic,
      consumer,
      key: request.key,
      ids: request.ids,
      outstanding: request.all ? undefined : { pool, parkedTable: parkedTable(config), consumer, aggregateType },
      unattributed: request.unattributed,
      horizonMs: request.beyondHorizon ? undefined : config.router.dlqReplayHorizonMs,
      dryRun: request.dryRun,
      timeoutMs: request.timeoutMs,
      followMs: request.followMs,
      logger: options.logger,
      onReplayed: options.onReplayed,
    });
    return { dlqTopic, aggregateType, consumer, report };
  } finally {
    await pool.end().catch(() => {});
  }
}

/** How long `dlq:release` waits before checking that a released key was not parked again. */
export const DEFAULT_RELEASE_SETTLE_MS = 2_000;

export interface ReleaseRequest {
  aggregateType?: string;
  key?: string;
  id?: string;
  head: boolean;
  consumer?: string;
  settleMs: number;
}

export interface ReleaseOutcome {
  consumer: string;
  released: Array<{ aggregateId: string; eventId: string }>;
  /** Whole keys released and parked again within settleMs; undefined when not checked (one event, nothing released, settleMs 0). */
  parkedAgain?: Array<{ aggregateId: string; head: string; errorCode: string; rows: number }>;
}

/**
 * `dlq:release`: deletes the parked rows (releaseKeys); after releasing whole keys, waits `settleMs` and
 * reads which were parked again. `onReleased` runs between the two (the CLI prints the released rows then).
 */
export async function runDlqRelease(config: OutboxConfig, request: ReleaseRequest, options: { onReleased?: (outcome: Pick<ReleaseOutcome, 'consumer' | 'released'>) => void } = {}): Promise<ReleaseOutcome> {
  if (!request.aggregateType) throw new OutboxError('FLAG_INVALID', 'dlq:release needs --aggregate-type <type>.');
  const aggregateType = request.aggregateType;
  const pool = createPool(config.database, { max: 1, application_name: 'outbox-dlq-release' });
  try {
    const consumer = consumerName(config, request.consumer ?? config.router.consumer);
    const released = await releaseKeys(pool, parkedTable(config), consumer, aggregateType, { key: request.key, id: request.id, head: request.head });
    if ((request.id !== undefined || request.head) && released.length === 0) {
      throw new OutboxError(
        'PARKED_NOT_FOUND',
        `Nothing parked matches ${request.head ? `the head of key ${JSON.stringify(request.key)}` : `event id ${JSON.stringify(request.id)}`} for aggregate type ${JSON.stringify(aggregateType)} and consumer ${JSON.stringify(consumer)}; outbox dlq:replay --dry-run lists what is outstanding.`,
      );
    }
    options.onReleased?.({ consumer, released });
    // A router batch that loaded a key's head before the release parks the key's next event behind it.
    if (request.id !== undefined || request.head || request.settleMs <= 0 || released.length === 0) return { consumer, released };
    await sleep(request.settleMs);
    const again = await parkedAgain(pool, parkedTable(config), consumer, aggregateType, released.map((r) => r.aggregateId));
    return { consumer, released, parkedAgain: again };
  } finally {
    await pool.end().catch(() => {});
  }
}
