import type { Admin, Producer } from 'kafkajs';
import type { Sender } from './publish';
import { chunkByBytes, groupByTopic, type RelayRecord } from './records';
import type { RelayRuntime } from './runtime';
import { durabilityConfigEntries, durabilityForNewTopic } from '../topics/replication';
import { createAckCheck, type AckCheck } from '../kafka/ack-check';

/** Bytes per send: well under Kafka's default 1 MiB record-batch limit; a larger record goes alone. */
const CHUNK_BYTES = 512 * 1024;
/** Headroom for key and headers over the largest payload, as the connector's topic.creation uses. */
const HEADROOM_BYTES = 64 * 1024;

/**
 * The relay's Kafka side: topics appear as Connect's topic.creation would make them. Existing topics are
 * looked up first (creating one that exists makes kafkajs log an error), and concurrent workers share
 * one creation per topic. Chunks are sent one after the other, each acknowledged before the next: a
 * key's order holds across them.
 */
export function createSender(rt: RelayRuntime): Sender & { forget(): void } {
  const knownTopics = new Set<string>();
  const creating = new Map<string, Promise<void>>();
  let ackCheck: AckCheck | undefined;

  async function create(topic: string): Promise<void> {
    const admin = rt.admin as Admin;
    const existing = new Set(await admin.listTopics());
    if (!existing.has(topic)) {
      // Replicas and min.insync.replicas by the one rule (src/topics/replication.ts), unless relay.* sets them.
      const durability = await durabilityForNewTopic(admin, {
        replicationFactor: rt.settings.topicReplicationFactor,
        minInsyncReplicas: rt.settings.topicMinInsyncReplicas,
        names: { replicationFactor: 'relay.topicReplicationFactor', minInsyncReplicas: 'relay.topicMinInsyncReplicas' },
      });
      await admin.createTopics({
        waitForLeaders: true,
        topics: [
          {
            topic,
            numPartitions: rt.settings.topicPartitions,
            replicationFactor: durability.replicationFactor,
            // As the connector's topic.creation.default.max.message.bytes: the largest payload plus headroom.
            configEntries: [{ name: 'max.message.bytes', value: String(Math.max(1024 * 1024, rt.config.outbox.maxPayloadBytes + HEADROOM_BYTES)) }, ...durabilityConfigEntries(durability)],
          },
        ],
      });
    }
    knownTopics.add(topic);
  }

  async function ensureTopics(records: readonly RelayRecord[]): Promise<void> {
    const missing = [...new Set(records.map((r) => r.topic))].filter((t) => !knownTopics.has(t));
    await Promise.all(
      missing.map((topic) => {
        let pending = creating.get(topic);
        if (!pending) {
          pending = create(topic).finally(() => creating.delete(topic));
          creating.set(topic, pending);
        }
        return pending;
      }),
    );
  }

  const message = (r: RelayRecord) => ({ key: r.key, value: r.value, headers: r.headers });
  return {
    async sendAll(records) {
      await ensureTopics(records);
      for (const chunk of chunkByBytes(records, CHUNK_BYTES)) {
        const acknowledged = await (rt.producer as Producer).sendBatch({ acks: -1, topicMessages: groupByTopic(chunk).map(({ topic, records: rs }) => ({ topic, messages: rs.map(message) })) });
        // A batch over several partitions: kafkajs may have skipped one (src/kafka/ack-check.ts). The
        // per-key slow path that a throw here starts sends one partition per call, which it cannot skip.
        ackCheck ??= createAckCheck(rt.admin as Admin);
        await ackCheck.verify(chunk, acknowledged);
      }
    },
    async sendKey(group) {
      await ensureTopics(group.records);
      for (const chunk of chunkByBytes(group.records, CHUNK_BYTES)) {
        await (rt.producer as Producer).send({ topic: group.topic, acks: -1, messages: chunk.map(message) });
      }
    },
    forget: () => {
      knownTopics.clear();
      ackCheck?.forget();
    },
  };
}
