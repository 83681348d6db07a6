import { randomUUID } from 'node:crypto';
import type { Kafka, KafkaMessage } from 'kafkajs';
import { OutboxError } from '../errors';

/**
 * What a failed read reports: the replay's own errors as they are, anything else from kafkajs (it gave up
 * retrying: brokers down, the group's coordinator not found) as DLQ_UNAVAILABLE naming the topic, not as
 * an unexpected failure.
 */
export function readFailure(topic: string, error: unknown): unknown {
  if (error instanceof OutboxError) return error;
  const name = (error as { name?: unknown })?.name;
  if (typeof name !== 'string' || !name.startsWith('KafkaJS')) return error;
  return new OutboxError('DLQ_UNAVAILABLE', `Reading ${topic} failed: ${(error as Error).message} (${name}). Check the brokers (\`outbox status\`) and run the replay again: what it re-published before is dropped as duplicates by the consumers.`, {
    retriable: true,
    cause: error,
  });
}

/** How often a following replay checks whether its keys are released. */
const FOLLOW_POLL_MS = 200;

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
export async function readToEnd(
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
        reject(readFailure(topic, error));
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
          for (const message of batch.messages) {
            // Following, records past the end are handed on too: kafkajs would not fetch them again.
            if (BigInt(message.offset) >= end && !follow) break;
            try {
              await each(batch.partition, message);
            } catch (error) {
              fail(error);
              return;
            }
            if (failed || finished) return;
            arm();
            // A heartbeat's error (NOT_COORDINATOR while the group's coordinator moves to another broker,
            // a rebalance) is kafkajs's to handle: thrown on, it finds the coordinator, rejoins and hands
            // the batch over again (what was replayed is replayed again: consumers drop duplicates by id).
            // Failing the replay on it made dlq:replay exit INTERNAL after a broker restart on a cluster.
            await heartbeat();
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
