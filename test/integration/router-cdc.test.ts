import type { Pool } from 'pg';
import { createCodec, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { deleteConnector, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { createOutboxWriter, type OutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { createRouter, type Router, type RoutedEvent } from '../../src/router';
import { waitForTopics } from '../support/consume';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(180_000);

/**
 * The whole pipeline with the router at the end: writer transaction → outbox → Debezium + Event Router
 * → Kafka → router → handler effect in the inbox transaction. Checks that the real SMT's records
 * (null `headers` header, traceparent, Avro framing) reach handlers as the contract says.
 */
describe('router behind the real CDC pipeline', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let writer: OutboxWriter;
  let prefix: string;
  let router: Router | undefined;

  beforeAll(async () => {
    db = await freshDatabase('routercdc');
    prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, { connector: { topicReplacement, topicPrefix: prefix } });
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await pool.query('CREATE TABLE effects (seq bigserial PRIMARY KEY, message_id uuid NOT NULL, aggregate_id text NOT NULL, reason text NOT NULL, tenant text, traceparent text)');
    const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
    writer = createOutboxWriter({ outbox: config.outbox, codec });
    await deployConnector(config);
  });

  afterAll(async () => {
    await router?.stop();
    await deleteConnector(config, { dropSlot: true }).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  async function write(aggregateId: string, seq: number): Promise<string> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const written = await writer.writeEvent(client, {
        aggregateType: 'order',
        aggregateId,
        type: 'OrderCancelled',
        payload: { orderId: aggregateId, reason: String(seq), cancelledAt: new Date() },
        headers: seq % 2 === 0 ? { tenant: 'acme' } : undefined,
        traceparent: seq === 0 ? '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' : undefined,
      });
      await client.query('COMMIT');
      return written.id;
    } finally {
      client.release();
    }
  }

  it('applies committed events once each, in order per aggregate, with headers and traceparent', async () => {
    const aggregates = ['a', 'b', 'c'].map((x) => `${x}-${prefix}`);
    const ids: string[] = [await write(aggregates[0] as string, 0)];
    // The regex subscription sees topics that exist at start(): wait for Connect to create it.
    await waitForTopics([`${prefix}.outbox.event.order`], 90_000);
    const seen: RoutedEvent[] = [];
    router = createRouter({
      config,
      consumer: `c-${prefix}`,
      groupId: randomName('g'),
      allowGroupIdMismatch: true,
      topics: new RegExp(`^${prefix}\\.outbox\\.event\\.`),
      logger: createLogger({ level: 'silent' }),
      handlers: {
        order: {
          OrderCancelled: async (event, { tx }) => {
            seen.push(event);
            await tx.query('INSERT INTO effects (message_id, aggregate_id, reason, tenant, traceparent) VALUES ($1, $2, $3, $4, $5)', [
              event.id,
              event.aggregateId,
              event.payload.reason,
              event.headers.tenant ?? null,
              event.traceparent ?? null,
            ]);
          },
        },
      },
    });
    await router.start();
    for (let seq = 1; seq < 10; seq++) for (const a of aggregates) ids.push(await write(a, seq));

    const deadline = Date.now() + 90_000;
    while ((router.stats().applied < 28) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(router.stats()).toMatchObject({ applied: 28, deadLettered: 0 });
    const rows = (await pool.query('SELECT message_id, aggregate_id, reason, tenant, traceparent FROM effects ORDER BY seq')).rows;
    expect(new Set(rows.map((r) => r.message_id))).toEqual(new Set(ids));
    for (const a of aggregates) {
      const seqs = rows.filter((r) => r.aggregate_id === a).map((r) => Number(r.reason));
      expect(seqs).toEqual(a === aggregates[0] ? [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] : [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }
    expect(rows.every((r) => (Number(r.reason) % 2 === 0 ? r.tenant === 'acme' : r.tenant === null))).toBe(true);
    expect(rows.filter((r) => r.traceparent).map((r) => r.reason)).toEqual(['0']);
    expect(seen.every((e) => e.aggregateType === 'order' && e.createdAt instanceof Date && !Number.isNaN(e.createdAt.getTime()))).toBe(true);
  });
});
