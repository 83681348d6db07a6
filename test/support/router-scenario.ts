import { Partitioners, type Admin, type IHeaders, type Producer } from 'kafkajs';
import type { Pool } from 'pg';
import { AVRO_CONTENT_TYPE, createCodec, type Codec } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { provision } from '../../src/provision';
import { createRouter, type EventHandler, type Handlers, type Router, type RouterOptions } from '../../src/router';
import { testConfig } from './outbox-config';
import { freshDatabase, randomName, testKafka, type FreshDatabase } from './stack-env';
import { randomUUID } from 'node:crypto';
import { waitsUpTo } from './until';

export interface Scenario {
  run: string;
  topic: string;
  dlq: string;
  codec: Codec;
}

export interface Rec {
  key: string;
  reason?: string;
  id?: string;
  headers?: IHeaders;
  value?: Buffer;
}

/**
 * The router on the real stack, for one test file: a fresh provisioned database with an `effects`
 * table, and records produced straight to Kafka in the Event Router's shape (key = aggregate id;
 * headers id, eventType, contentType, headers; Avro value framed by the codec), on topics of their
 * own per scenario, so tests never see each other's records. Registers its own beforeAll/afterAll.
 */
export function routerHarness(name = 'router') {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let admin: Admin;
  let producer: Producer;
  const routers: Router[] = [];
  const silent = createLogger({ level: 'silent' });

  beforeAll(async () => {
    db = await freshDatabase(name);
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await pool.query('CREATE TABLE effects (seq bigserial PRIMARY KEY, run text NOT NULL, message_id uuid NOT NULL, aggregate_id text NOT NULL, reason text NOT NULL, tenant text)');
    const kafka = testKafka();
    admin = kafka.admin();
    producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await Promise.all([admin.connect(), producer.connect()]);
  });

  afterEach(async () => {
    await Promise.all(routers.splice(0).map((r) => r.stop()));
  });

  afterAll(async () => {
    await Promise.all([admin?.disconnect(), producer?.disconnect()]);
    await pool?.end();
    await db?.drop();
  });


  /** `dlq: false` leaves the dead-letter topic for the router to create. */
  async function scenario(partitions: number, { dlq: withDlq = true } = {}): Promise<Scenario> {
    const run = randomName('t').replace(/-/g, '');
    const topic = `${run}.outbox.event.order`;
    const dlq = `${run}.outbox.dlq.order`;
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions }, ...(withDlq ? [{ topic: dlq, numPartitions: 1 }] : [])], waitForLeaders: true });
    return { run, topic, dlq, codec: createCodec({ registry: config.registry, autoRegister: true, topicFor: () => topic }) };
  }


  /** Event Router-shaped records; returns them with their ids. */
  async function produce(s: Scenario, recs: Rec[]): Promise<Array<Rec & { id: string; value: Buffer; headers: IHeaders }>> {
    const out = await Promise.all(
      recs.map(async (r) => {
        const value = r.value ?? (await s.codec.encode('order', 'OrderCancelled', { orderId: r.key, reason: r.reason ?? 'x', cancelledAt: new Date() }, AVRO_CONTENT_TYPE));
        const id = r.id ?? randomUUID();
        const headers: IHeaders = r.headers ?? { id, eventType: 'OrderCancelled', contentType: AVRO_CONTENT_TYPE, headers: JSON.stringify({ tenant: 'acme' }) };
        return { ...r, id, value, headers };
      }),
    );
    await producer.send({ topic: s.topic, acks: -1, messages: out.map((r) => ({ key: r.key, value: r.value, headers: r.headers })) });
    return out;
  }

  /** Records each applied event in `effects` through ctx.tx; `fail` decides per call whether to throw after writing. */
  function handlers(s: Scenario, fail: (reason: string, call: number) => Error | undefined = () => undefined): { order: { OrderCancelled: EventHandler } } {
    const calls = new Map<string, number>();
    return {
      order: {
        OrderCancelled: async (event, { tx }) => {
          const call = (calls.get(event.id) ?? 0) + 1;
          calls.set(event.id, call);
          await tx.query('INSERT INTO effects (run, message_id, aggregate_id, reason, tenant) VALUES ($1, $2, $3, $4, $5)', [
            s.run,
            event.id,
            event.aggregateId,
            event.payload.reason,
            event.headers.tenant ?? null,
          ]);
          const error = fail(event.payload.reason, call);
          if (error) throw error;
        },
      },
    };
  }

  async function startRouter(s: Scenario, h: Handlers, extra: Partial<RouterOptions> = {}): Promise<Router> {
    const router = createRouter({
      config,
      handlers: h,
      topics: new RegExp(`^${s.run}\\.outbox\\.event\\.`),
      consumer: `c-${s.run}`,
      groupId: randomName('g'),
      // Tests start new groups over one inbox on purpose (e.g. a rewind).
      allowGroupIdMismatch: true,
      backoff: { initialDelayMs: 5, maxDelayMs: 20 },
      logger: silent,
      ...extra,
    });
    routers.push(router);
    await router.start();
    return router;
  }

  /** Waits, but never forever: a blocked partition fails the test instead of hanging it. */
  const until = waitsUpTo(45_000);

  const effects = async (s: Scenario) =>
    (await pool.query('SELECT message_id, aggregate_id, reason, tenant FROM effects WHERE run = $1 ORDER BY seq', [s.run])).rows as Array<{
      message_id: string;
      aggregate_id: string;
      reason: string;
      tenant: string | null;
    }>;

  return {
    get config() {
      return config;
    },
    get pool() {
      return pool;
    },
    get admin() {
      return admin;
    },
    get producer() {
      return producer;
    },
    silent,
    routers,
    scenario,
    produce,
    handlers,
    startRouter,
    until,
    effects,
  };
}

export type RouterHarness = ReturnType<typeof routerHarness>;
