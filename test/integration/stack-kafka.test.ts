import { Partitioners, type Admin } from 'kafkajs';
import { randomName, testKafka } from '../support/stack-env';

describe('native stack: Kafka', () => {
  const kafka = testKafka();
  let admin: Admin;

  beforeAll(async () => {
    admin = kafka.admin();
    await admin.connect();
  });

  afterAll(async () => {
    await admin?.disconnect();
  });

  it('answers metadata with one KRaft broker', async () => {
    const cluster = await admin.describeCluster();
    expect(cluster.brokers).toHaveLength(1);
    expect(cluster.brokers[0]).toMatchObject({ host: '127.0.0.1', port: 9092 });
  });

  it('produces and consumes a keyed record with headers through a consumer group', async () => {
    const topic = randomName('smoke');
    await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
    const producer = kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
    const consumer = kafka.consumer({ groupId: randomName('smoke-group'), maxWaitTimeInMs: 100 });
    try {
      await producer.connect();
      const [meta] = await producer.send({
        topic,
        acks: -1,
        messages: [{ key: 'order-42', value: Buffer.from([0, 1, 2, 255]), headers: { eventType: 'OrderCreated' } }],
      });
      expect(meta?.errorCode).toBe(0);

      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const received = await new Promise<{ key: string; value: Buffer; eventType: string; partition: number }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no record consumed within 30 s')), 30_000);
        void consumer.run({
          eachMessage: async ({ message, partition }) => {
            clearTimeout(timer);
            resolve({
              key: message.key?.toString() ?? '',
              value: message.value as Buffer,
              eventType: message.headers?.eventType?.toString() ?? '',
              partition,
            });
          },
        });
      });
      expect(received.key).toBe('order-42');
      expect([...received.value]).toEqual([0, 1, 2, 255]);
      expect(received.eventType).toBe('OrderCreated');
      expect(received.partition).toBe(meta?.partition);
    } finally {
      await consumer.disconnect();
      await producer.disconnect();
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
    }
  });
});
