/**
 * kafkajs 2.2.4 can resolve a multi-partition send without having sent some of its records. Its
 * sendMessages keeps one map of broker → response across retries, and on a retry sends only to brokers
 * without a response: when a broker dies mid-send and its partitions move to a broker that has already
 * answered for other partitions of the same send, those partitions' records are never sent, and the
 * send resolves as a success (kafkajs issue #1303, open since 2022; pull request #1798 is unmerged).
 * Found by the chaos run on a three-broker cluster: a relay batch marked published with one record
 * missing from its partition. A send to one partition cannot hit it (one broker per attempt).
 *
 * The check: every partition a send's records go to must be in what the send returned, with no error.
 * The records' partitions are computed as the producer computes them (kafkajs's DefaultPartitioner:
 * murmur2 of the key over the topic's partition count), from the topic's partitions read once and
 * again only when an answer does not fit. A send that fails the check is to be sent again, which is
 * at-least-once as usual (the inbox drops the duplicates of the partitions that did arrive).
 */
import { Partitioners, type Admin, type PartitionMetadata, type RecordMetadata } from 'kafkajs';
import { OutboxError } from '../errors';

export interface KeyedRecord {
  topic: string;
  /** Keyed records only: a record without a key goes to a random available partition, which nothing can predict. */
  key: string | Buffer;
}

export interface AckCheck {
  /** Throws KAFKA_SEND_UNACKNOWLEDGED when a partition of `records` is not in `acknowledged`. */
  verify(records: readonly KeyedRecord[], acknowledged: readonly RecordMetadata[]): Promise<void>;
  /** Forget the cached partitions (a topic was re-created). */
  forget(): void;
}

export function createAckCheck(admin: Pick<Admin, 'fetchTopicMetadata'>): AckCheck {
  const partitioner = Partitioners.DefaultPartitioner();
  const partitionsOf = new Map<string, PartitionMetadata[]>();

  async function load(topics: readonly string[]): Promise<void> {
    const { topics: found } = await admin.fetchTopicMetadata({ topics: [...topics] });
    for (const t of found) partitionsOf.set(t.name, t.partitions);
  }

  /** Each record's (topic, partition) the producer sent it to, keyed "topic\u0000partition". */
  function expected(records: readonly KeyedRecord[]): Set<string> {
    const out = new Set<string>();
    for (const r of records) {
      const partitionMetadata = partitionsOf.get(r.topic) ?? [];
      const partition = partitioner({ topic: r.topic, partitionMetadata, message: { key: r.key, value: null } });
      out.add(`${r.topic}\u0000${partition}`);
    }
    return out;
  }

  const missingFrom = (records: readonly KeyedRecord[], acknowledged: readonly RecordMetadata[]): string[] => {
    const acked = new Set(acknowledged.filter((m) => m.errorCode === 0).map((m) => `${m.topicName}\u0000${m.partition}`));
    return [...expected(records)].filter((tp) => !acked.has(tp));
  };

  return {
    async verify(records, acknowledged) {
      if (records.length === 0) return;
      const topics = [...new Set(records.map((r) => r.topic))];
      const unknown = topics.filter((t) => !partitionsOf.has(t));
      if (unknown.length) await load(unknown);
      let missing = missingFrom(records, acknowledged);
      if (missing.length === 0) return;
      // The partition count may have changed since it was read: read again before calling it a loss.
      await load(topics);
      missing = missingFrom(records, acknowledged);
      if (missing.length === 0) return;
      const named = missing.map((tp) => tp.replace('\u0000', ' partition ')).join(', ');
      throw new OutboxError(
        'KAFKA_SEND_UNACKNOWLEDGED',
        `Kafka acknowledged a send without ${named}: the records for it were never sent (kafkajs 2.2.4 skips a partition whose leader moved, mid-send, ` +
          'to a broker that had already answered; kafkajs issue #1303). They are sent again; nothing is marked published until they are acknowledged.',
        { retriable: true, details: { missing: missing.map((tp) => tp.replace('\u0000', ':')) } },
      );
    },
    forget: () => partitionsOf.clear(),
  };
}
