import { randomUUID } from 'node:crypto';
import type { IHeaders, KafkaMessage } from 'kafkajs';
import type { Pool } from 'pg';
import { createCodec, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { deleteConnector, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { createOutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { createRelay, type Relay } from '../../src/relay';
import { waitForTopics } from '../support/consume';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, testKafka, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(180_000);

interface Raw {
  partition: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: IHeaders;
}

/** Reads a topic from the beginning until `count` records, keeping key, value and headers exactly as the broker has them. */
async function readRaw(topic: string, count: number, timeoutMs = 90_000): Promise<Raw[]> {
  await waitForTopics([topic], timeoutMs);
  const consumer = testKafka().consumer({ groupId: randomName('raw'), maxWaitTimeInMs: 100 });
  const out: Raw[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`readRaw ${topic}: ${out.length} of ${count} records within ${timeoutMs} ms`)), timeoutMs);
      void consumer
        .run({
          eachMessage: async ({ partition, message }: { partition: number; message: KafkaMessage }) => {
            out.push({ partition, key: message.key, value: message.value, headers: message.headers ?? {} });
            if (out.length >= count) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
    return out;
  } finally {
    await consumer.disconnect();
  }
}

/** Header name → value as text, a null-valued header as null. */
function headerValues(headers: IHeaders): Record<string, string | null> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v === null || v === undefined ? null : Buffer.isBuffer(v) ? v.toString('utf8') : String(v)]));
}

/**
 * The relay and the real CDC pipeline side by side on the same outbox rows: Debezium + Event Router
 * route to one topic prefix, the relay to another. Each record must match: key, value bytes,
 * partition, headers (except that a NULL column is a null-valued header from the SMT and an absent one
 * from the relay, see docs/relay.md).
 */
describe('relay and CDC publish the same records', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let relay: Relay | undefined;
  let cdcPrefix: string;
  let relayPrefix: string;

  beforeAll(async () => {
    db = await freshDatabase('relaycdc');
    cdcPrefix = randomName('c').replace(/-/g, '');
    relayPrefix = randomName('r').replace(/-/g, '');
    config = testConfig(db.name, { connector: { topicReplacement: `${cdcPrefix}.outbox.event.\${routedByValue}`, topicPrefix: cdcPrefix } });
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await deployConnector(config);
  });

  afterAll(async () => {
    await relay?.stop();
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  it('same key, value bytes, partition and headers for Avro with and without traceparent and extra headers', async () => {
    // Avro subjects follow the topic; register under the CDC topic, whose records both paths then carry.
    const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(config.connector.topicReplacement) });
    const writer = createOutboxWriter({ outbox: config.outbox, codec });
    const orderId = randomName('order');
    // Both rows in one transaction: CDC follows insert order, and so does the relay (it orders by seq, numbered
    // at insert; docs/relay.md, "What order is guaranteed"). Ids descending in write order: they play no part.
    const [firstId, secondId] = [randomUUID(), randomUUID()].sort().reverse();
    const client = await pool.connect();
    let ids: string[];
    try {
      await client.query('BEGIN');
      ids = (
        await writer.writeEvents(client, [
          {
            id: firstId,
            aggregateType: 'order',
            aggregateId: orderId,
            type: 'OrderCancelled',
            payload: { orderId, reason: 'with', cancelledAt: new Date() },
            traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
            headers: { tenant: 'acme', 'x-ü': 'ünïcode' },
          },
          { id: secondId, aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason: 'without', cancelledAt: new Date() } },
        ])
      ).map((w) => w.id);
      await client.query('COMMIT');
    } finally {
      client.release();
    }

    relay = createRelay({ config, topicFor: topicForReplacement(`${relayPrefix}.outbox.event.\${routedByValue}`), logger: createLogger({ level: 'silent' }), settings: { workers: 2, pollIntervalMs: 20 } });
    await relay.start();
    const [cdc, viaRelay] = await Promise.all([readRaw(`${cdcPrefix}.outbox.event.order`, 2), readRaw(`${relayPrefix}.outbox.event.order`, 2)]);

    expect(cdc).toHaveLength(2);
    expect(viaRelay).toHaveLength(2);
    for (let i = 0; i < 2; i++) {
      const a = cdc[i] as Raw;
      const b = viaRelay[i] as Raw;
      expect(b.key?.equals(a.key as Buffer)).toBe(true);
      expect(b.value?.equals(a.value as Buffer)).toBe(true);
      expect(b.partition).toBe(a.partition);
      const fromCdc = headerValues(a.headers);
      const fromRelay = headerValues(b.headers);
      expect(fromCdc.id).toBe(ids[i]);
      // The only allowed difference: null-valued headers from the SMT are absent from the relay's record.
      const nonNull = Object.fromEntries(Object.entries(fromCdc).filter(([, v]) => v !== null));
      expect(fromRelay).toEqual(nonNull);
    }
    // The first event carries every header; the second has NULL traceparent and headers columns.
    expect(Object.keys(headerValues((cdc[0] as Raw).headers)).sort()).toEqual(['contentType', 'eventType', 'headers', 'id', 'traceparent']);
    expect(headerValues((viaRelay[0] as Raw).headers).headers).toBe(JSON.stringify({ tenant: 'acme', 'x-ü': 'ünïcode' }));
    expect(Object.keys(headerValues((viaRelay[1] as Raw).headers)).sort()).toEqual(['contentType', 'eventType', 'id']);
  });
});
