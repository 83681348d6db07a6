import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { createCodec, topicForReplacement } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { deleteConnector, deployConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { createOutboxWriter, type OutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { createRouter, replayDeadLetters, type EventHandler, type Router, type RoutedEvent } from '../../src/router';
import { qualified } from '../../src/db';
import { parkedTableName } from '../../src/provision/sql-files';
import { createEffectsTable, recordingHandler } from '../support/effects';
import { collect, waitForTopics } from '../support/consume';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, testKafka, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

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
  /** Waits, but never forever: a blocked partition fails the test instead of hanging it. */
  const until = waitsUpTo(60_000);

  beforeAll(async () => {
    db = await freshDatabase('routercdc');
    prefix = randomName('t').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, { connector: { topicReplacement, topicPrefix: prefix } });
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await createEffectsTable(pool);
    const codec = createCodec({ registry: config.registry, autoRegister: true, topicFor: topicForReplacement(topicReplacement) });
    writer = createOutboxWriter({ outbox: config.outbox, codec });
    await deployConnector(config);
  });

  afterAll(async () => {
    await router?.stop();
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
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
          OrderCancelled: recordingHandler(seen),
        },
      },
    });
    await router.start();
    for (let seq = 1; seq < 10; seq++) for (const a of aggregates) ids.push(await write(a, seq));

    await until('28 applied', () => router?.stats().applied ?? 0, (n) => n >= 28, 90_000);
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

  it('a poison row written by plain SQL (traceparent and headers NULL) is dead-lettered, the partition moves on, and dlq:replay applies it once after the fix', async () => {
    await router?.stop();
    router = undefined;
    const aggregateType = `parcel${prefix.slice(-6)}`;
    const topic = `${prefix}.outbox.event.${aggregateType}`;
    const dlq = `${prefix}.outbox.dlq.${aggregateType}`;
    const rows = [
      { key: 'p1', type: 'ParcelLost', note: 'poison' }, // no handler yet
      { key: 'p2', type: 'ParcelMoved', note: 'p2-1' },
      { key: 'p1', type: 'ParcelMoved', note: 'p1-after' }, // parked behind the poison
      { key: 'p3', type: 'ParcelMoved', note: 'p3-1' },
      { key: 'p2', type: 'ParcelMoved', note: 'p2-2' },
    ].map((r) => ({ ...r, id: randomUUID() }));
    // Plain SQL, as any writer that does not set traceparent or headers: both NULL.
    for (const r of rows) {
      await pool.query(
        `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES ($1, $2, $3, $4, convert_to($5, 'UTF8'), 'application/json')`,
        [r.id, aggregateType, r.key, r.type, JSON.stringify({ note: r.note })],
      );
    }
    await waitForTopics([topic], 90_000);
    const apply = recordingHandler([], (event) => (event.payload as { note: string }).note);
    const parcel: Record<string, EventHandler> = { ParcelMoved: apply };
    const consumer = `c-${prefix}-parcel`;
    router = createRouter({
      config,
      consumer,
      groupId: randomName('g'),
      allowGroupIdMismatch: true,
      topics: new RegExp(`^${topic.replace(/\./g, '\\.')}$`),
      logger: createLogger({ level: 'silent' }),
      backoff: { initialDelayMs: 5, maxDelayMs: 20 },
      handlers: { [aggregateType]: parcel },
    });
    await router.start();
    const r = router;
    await until('the rest of the partition applied, the poison and its follower dead-lettered', () => r.stats(), (st) => st.applied === 3 && st.deadLettered === 2);
    const byNote = async () => (await pool.query('SELECT message_id, aggregate_id, reason, traceparent FROM effects WHERE aggregate_id LIKE $1 ORDER BY seq', ['p_'])).rows;
    const perKey = async (key: string) => (await byNote()).filter((e) => e.aggregate_id === key).map((e) => e.reason);
    expect([await perKey('p1'), await perKey('p2'), await perKey('p3')]).toEqual([[], ['p2-1', 'p2-2'], ['p3-1']]);
    expect((await byNote()).every((e) => e.traceparent === null)).toBe(true);

    const letters = await collect([dlq], (rs) => rs.length >= 2);
    expect(letters.map((l) => [l.key, l.headers.id, l.headers['x-error-code']])).toEqual([
      ['p1', rows[0]?.id, 'HANDLER_NOT_FOUND'],
      ['p1', rows[2]?.id, 'KEY_PARKED'],
    ]);
    // the NULL columns are not carried as headers that no producer could write
    expect(letters.every((l) => !('traceparent' in l.headers) && !('headers' in l.headers))).toBe(true);

    // the fix: a handler for the poison's type; replay brings both back, in order, applied once each
    parcel.ParcelLost = apply;
    const outstanding = { pool, parkedTable: qualified('public', parkedTableName('inbox')), consumer, aggregateType };
    const report = await replayDeadLetters({ kafka: testKafka(), dlqTopic: dlq, outstanding });
    expect(report.sample.map((x) => x.id)).toEqual([rows[0]?.id, rows[2]?.id]);
    await until('replayed events applied', () => r.stats(), (st) => st.applied === 5);
    expect(await perKey('p1')).toEqual(['poison', 'p1-after']);
    // the NULL traceparent came back absent, which the router reads as it reads null
    expect((await byNote()).every((e) => e.traceparent === null)).toBe(true);
    expect((await pool.query('SELECT count(*)::int AS n FROM inbox_parked WHERE consumer = $1', [consumer])).rows[0].n).toBe(0);

    // replaying everything again changes nothing: the inbox skips both
    expect((await replayDeadLetters({ kafka: testKafka(), dlqTopic: dlq, consumer })).replayed).toBe(2);
    await until('second replay skipped', () => r.stats(), (st) => st.duplicates === 2);
    const applied = await byNote();
    expect(applied).toHaveLength(5);
    expect(new Set(applied.map((e) => e.message_id))).toEqual(new Set(rows.map((x) => x.id)));
  });
});
