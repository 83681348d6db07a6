import { randomUUID } from 'node:crypto';
import axios from 'axios';
import type { Pool } from 'pg';
import { createRegistryConnection, frameConfluent } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { provision } from '../../src/provision';
import { createRouter, type RoutedEvent, type RouterOptions } from '../../src/router';
import { collectStatus } from '../../src/status';
import { createWatchdog } from '../../src/watchdog';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, randomName, stackUrls, withClient, type FreshDatabase } from '../support/stack-env';
import { until } from '../support/until';
import { Type } from 'avsc';

jest.setTimeout(420_000);

/**
 * A team's existing Debezium outbox (docs/adopting-debezium-outbox.md): a Quarkus-style `outboxevent`
 * table and a connector deployed by plain REST calls in Debezium's documented shape, which
 * `connector:deploy` never saw. One connector, reconfigured per converter (a connector per converter
 * would be five on this 2-core box); each converter writes a topic of its own aggregate type, read by
 * a router with the matching router.envelope settings, exactly once (inbox rows, effects, a redelivery
 * skipped). Then the watchdog and `outbox status` on the foreign connector, slot and publication.
 */
describe('adopting a stock Debezium outbox', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let foreign: OutboxConfig;
  let pool: Pool;
  const connector = randomIdentifier('dbz_orders');
  const slot = randomIdentifier('dbz_slot');
  const publication = randomIdentifier('dbz_pub');
  const run = randomName('adopt').replace(/-/g, '');
  const connect = axios.create({ baseURL: stackUrls.connect, validateStatus: () => true, timeout: 30_000 });

  /** Debezium's documented outbox connector (PostgreSQL connector + Outbox Event Router), on the team's names. */
  const connectorConfig = (converter: Record<string, string>, expandJson: boolean): Record<string, string> => ({
    'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
    'tasks.max': '1',
    'plugin.name': 'pgoutput',
    'database.hostname': '127.0.0.1',
    'database.port': String(config.database.port),
    'database.user': 'postgres',
    'database.password': 'postgres',
    'database.dbname': db.name,
    'topic.prefix': run,
    'slot.name': slot,
    'publication.name': publication,
    'publication.autocreate.mode': 'filtered',
    'table.include.list': 'public.outboxevent,public.outboxevent_bin',
    'tombstones.on.delete': 'false',
    'key.converter': 'org.apache.kafka.connect.storage.StringConverter',
    transforms: 'outbox',
    'transforms.outbox.type': 'io.debezium.transforms.outbox.EventRouter',
    'transforms.outbox.table.field.event.id': 'id',
    'transforms.outbox.table.field.event.key': 'aggregateid',
    'transforms.outbox.table.field.event.payload': 'payload',
    'transforms.outbox.route.by.field': 'aggregatetype',
    'transforms.outbox.route.topic.replacement': 'outbox.event.${routedByValue}',
    'transforms.outbox.table.fields.additional.placement': 'type:header:eventType',
    'transforms.outbox.table.expand.json.payload': String(expandJson),
    ...converter,
  });

  async function putConnector(body: Record<string, string>): Promise<void> {
    const res = await connect.put(`/connectors/${connector}/config`, body);
    expect([200, 201]).toContain(res.status);
    // A new config restarts the task: wait until it runs with it (a record written before would go out in the old format).
    await until(
      'the connector task runs the new config',
      async () => (await connect.get(`/connectors/${connector}/status`)).data as { tasks?: Array<{ state: string; trace?: string }> },
      (s) => {
        const failed = s.tasks?.find((t) => t.state === 'FAILED');
        if (failed) throw new Error(`connector task FAILED: ${failed.trace?.split('\n')[0]}`);
        return s.tasks?.length === 1 && s.tasks[0]?.state === 'RUNNING';
      },
      120_000,
    );
    await until('the task has the new config', async () => (await connect.get(`/connectors/${connector}/tasks`)).data as Array<{ config: Record<string, string> }>, (tasks) =>
      Object.entries(body).every(([k, v]) => k === 'transforms.outbox.table.expand.json.payload' || !k.startsWith('value.') || tasks[0]?.config[k] === v),
    );
    // The task streams from its stored offset; give the replication connection a moment to be up.
    await new Promise((r) => setTimeout(r, 3_000));
  }

  beforeAll(async () => {
    db = await freshDatabase('dbz');
    // The router's side only: the inbox (and its migrations) in the team's database; the connector stays theirs.
    config = testConfig(db.name, { connector: { name: connector, slotName: slot } });
    await provision(config);
    // What the watchdog and `outbox status` are told about the team's pipeline: its connector, slot, publication and table.
    foreign = testConfig(db.name, { connector: { name: connector, slotName: slot }, outbox: { publication, table: 'outboxevent' }, roles: config.roles });
    pool = createPool(config.database, { max: 8 });
    await withClient(db.name, async (c) => {
      // The Quarkus Debezium outbox extension's table, and a team's variant with bigint ids and a bytea payload.
      await c.query('CREATE TABLE outboxevent (id uuid PRIMARY KEY, aggregatetype varchar(255) NOT NULL, aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, timestamp timestamp NOT NULL, payload jsonb)');
      await c.query('CREATE TABLE outboxevent_bin (id bigint PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, timestamp timestamptz NOT NULL DEFAULT now(), payload bytea)');
      await c.query('CREATE TABLE effects (consumer text NOT NULL, event_id text NOT NULL, order_id int NOT NULL, total int NOT NULL, PRIMARY KEY (consumer, event_id))');
    });
  });

  afterAll(async () => {
    await connect.delete(`/connectors/${connector}`).catch(() => {});
    await until('the slot is released', () => withClient('postgres', async (c) => (await c.query('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows as Array<{ active: boolean }>), (rows) => !rows[0]?.active, 60_000).catch(() => {});
    await withClient('postgres', (c) => c.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active', [slot])).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  /** Writes `n` events as the team's application does, runs a router with `envelope` until it applied them, then a second group: all duplicates. */
  async function roundTrip(aggregateType: string, envelope: RouterOptions['envelope'], write: (i: number) => Promise<string>, n = 3): Promise<RoutedEvent[]> {
    const ids: string[] = [];
    for (let i = 1; i <= n; i++) ids.push(await write(i));
    const consumer = `svc-${aggregateType}`;
    const seen: RoutedEvent[] = [];
    const handlers = {
      [aggregateType]: {
        OrderCreated: async (event: RoutedEvent, ctx: { tx: Pool | import('pg').PoolClient }) => {
          seen.push(event);
          const p = event.payload as { orderId: number; total: number };
          await ctx.tx.query('INSERT INTO effects (consumer, event_id, order_id, total) VALUES ($1, $2, $3, $4)', [consumer, event.id, p.orderId, p.total]);
        },
      },
    };
    const start = async (groupId: string) => {
      const router = createRouter({ config, handlers, consumer, groupId, allowGroupIdMismatch: groupId !== consumer, envelope, topicRefreshMs: 1_000, maxWaitTimeInMs: 200 });
      await router.start();
      return router;
    };
    const router = await start(consumer);
    try {
      await until(`${aggregateType}: ${n} applied`, () => router.stats(), (s) => s.applied + s.deadLettered >= n, 120_000);
      expect(router.stats()).toMatchObject({ applied: n, deadLettered: 0 });
    } finally {
      await router.stop();
    }
    const inbox = await pool.query<{ id: string }>('SELECT message_id::text AS id FROM inbox WHERE consumer = $1 ORDER BY processed_at', [consumer]);
    expect(inbox.rows.map((r) => r.id).sort()).toEqual([...ids].sort());
    const effects = await pool.query<{ order_id: number; total: number }>('SELECT order_id, total FROM effects WHERE consumer = $1 ORDER BY order_id', [consumer]);
    expect(effects.rows).toEqual(ids.map((_, i) => ({ order_id: i + 1, total: 100 * (i + 1) })));

    // A redelivery (the same records again, through another group) is skipped by the inbox: no second effect.
    const again = await start(`${consumer}-again`);
    try {
      await until(`${aggregateType}: ${n} duplicates`, () => again.stats(), (s) => s.duplicates + s.applied + s.deadLettered >= n, 120_000);
      expect(again.stats()).toMatchObject({ applied: 0, duplicates: n, deadLettered: 0 });
    } finally {
      await again.stop();
    }
    expect((await pool.query('SELECT count(*)::int AS n FROM effects WHERE consumer = $1', [consumer])).rows[0]).toEqual({ n });
    return seen;
  }

  const writeJson = (aggregateType: string) => async (i: number) => {
    const id = randomUUID();
    // The Quarkus extension: one INSERT in the business transaction (it deletes the row right after; Debezium ignores the delete).
    await pool.query('BEGIN');
    await pool.query('INSERT INTO outboxevent (id, aggregatetype, aggregateid, type, timestamp, payload) VALUES ($1, $2, $3, $4, now(), $5)', [id, aggregateType, `order-${i}`, 'OrderCreated', { orderId: i, total: 100 * i }]);
    await pool.query('DELETE FROM outboxevent WHERE id = $1', [id]);
    await pool.query('COMMIT');
    return id;
  };

  it('JsonConverter, schemas.enable=false, table.expand.json.payload=true: valueFormat json', async () => {
    const json = { 'value.converter': 'org.apache.kafka.connect.json.JsonConverter', 'value.converter.schemas.enable': 'false' };
    await putConnector(connectorConfig(json, true));
    const type = `${run}json`;
    const events = await roundTrip(type, { valueFormat: 'json' }, writeJson(type));
    expect(events[0]).toMatchObject({ aggregateType: type, aggregateId: 'order-1', type: 'OrderCreated', payload: { orderId: 1, total: 100 } });
  });

  it('JsonConverter, schemas.enable=true, payload not expanded (a JSON string in the envelope): valueFormat json-with-schema', async () => {
    await putConnector(connectorConfig({ 'value.converter': 'org.apache.kafka.connect.json.JsonConverter', 'value.converter.schemas.enable': 'true' }, false));
    const type = `${run}jsonschema`;
    await roundTrip(type, { valueFormat: 'json-with-schema' }, writeJson(type));
  });

  it('StringConverter: valueFormat string', async () => {
    await putConnector(connectorConfig({ 'value.converter': 'org.apache.kafka.connect.storage.StringConverter' }, false));
    const type = `${run}string`;
    await roundTrip(type, { valueFormat: 'string' }, writeJson(type));
  });

  let nextBigint = 1_000_000_000_000;
  const writeBytes = (aggregateType: string, encode: (payload: { orderId: number; total: number }) => Promise<Buffer>) => async (i: number) => {
    const id = nextBigint++;
    await pool.query('INSERT INTO outboxevent_bin (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, $4, $5)', [id, aggregateType, `order-${i}`, 'OrderCreated', await encode({ orderId: i, total: 100 * i })]);
    return String(id);
  };
  const binary = { 'value.converter': 'io.debezium.converters.BinaryDataConverter', 'value.converter.delegate.converter.type': 'org.apache.kafka.connect.json.JsonConverter', 'value.converter.delegate.converter.type.schemas.enable': 'false' };

  it('BinaryDataConverter on a bytea column with bigint ids and no contentType column: valueFormat bytes + defaultContentType; the inbox keeps the ids exactly', async () => {
    await putConnector(connectorConfig(binary, false));
    const type = `${run}bytes`;
    const events = await roundTrip(type, { valueFormat: 'bytes', defaultContentType: 'application/json' }, writeBytes(type, (p) => Promise.resolve(Buffer.from(JSON.stringify(p)))));
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => String(nextBigint - 3 + i)));
    // Without the default, today's refusal stands: the record is dead-lettered, naming the setting.
    const refused = await (async () => {
      const id = await writeBytes(type, (p) => Promise.resolve(Buffer.from(JSON.stringify(p))))(9);
      const letters: string[] = [];
      const router = createRouter({ config, consumer: `svc-${type}`, handlers: { [type]: { OrderCreated: async () => {} } }, onEvent: (name, data) => void (name === 'router.dead-letter' && letters.push(`${String(data.code)}: ${String(data.error)}`)), topicRefreshMs: 1_000 });
      await router.start();
      try {
        await until('the record without contentType dead-lettered', () => router.stats(), (s) => s.deadLettered >= 1, 120_000);
      } finally {
        await router.stop();
      }
      await pool.query('DELETE FROM effects WHERE event_id = $1', [id]);
      return letters.join(' ');
    })();
    expect(refused).toMatch(/^RECORD_INVALID: .*contentType.*defaultContentType/);
  });

  it('Avro through the registry (Confluent wire format, schema id in the value, no contentType header): valueFormat avro', async () => {
    // The connector keeps the BinaryDataConverter: the team's producer wrote registry-framed Avro into the bytea column.
    const registry = createRegistryConnection(config.registry);
    const schema = { type: 'record', name: 'OrderCreated', namespace: `adopt.${run}`, fields: [{ name: 'orderId', type: 'int' }, { name: 'total', type: 'int' }] };
    const type = `${run}avro`;
    const schemaId = await registry.register(`outbox.event.${type}-adopt.${run}.OrderCreated`, JSON.stringify(schema));
    const avro = Type.forSchema(schema as never);
    await roundTrip(type, { valueFormat: 'avro' }, writeBytes(type, (p) => Promise.resolve(frameConfluent(schemaId, avro.toBuffer(p)))));
  });

  it('the watchdog and `outbox status` follow the foreign connector, its slot and its publication', async () => {
    const pollOnce = async (cfg: OutboxConfig) => {
      const wd = createWatchdog({ config: cfg, deliver: false, instant: true });
      const poll = await wd.pollOnce();
      const statuses = wd.statuses();
      await wd.stop(0);
      return { poll, statuses };
    };
    // Told the team's names, the watchdog finds their slot and their publication of their table: nothing fires.
    const { poll, statuses } = await pollOnce(foreign);
    expect(poll.ok).toBe(true);
    expect(poll.sample?.slots.map((s) => s.slotName)).toContain(slot);
    expect(statuses.filter((s) => s.slot === slot || s.slot === null).map((s) => `${s.rule}: ${s.summary}`)).toEqual([]);
    // The same checks do look: their publication does not publish this project's outbox table, and a wrong slot name is missing.
    const wrong = await pollOnce(testConfig(db.name, { connector: { name: connector, slotName: `${slot}_x` }, outbox: { publication }, roles: config.roles }));
    expect(wrong.statuses.map((s) => `${s.rule}:${s.level}`)).toContain('SlotMissing:critical');
    const drift = await pollOnce(testConfig(db.name, { connector: { name: connector, slotName: slot }, outbox: { publication }, roles: config.roles }));
    expect(drift.statuses.filter((s) => s.slot === slot).map((s) => `${s.rule}:${s.level}`)).toEqual(['PublicationDrift:critical']);

    const status = await collectStatus(foreign, { timeoutMs: 15_000, groups: [] });
    expect(status.connector).toMatchObject({ ok: true, name: connector, state: 'RUNNING', slotName: slot });
    expect(status.slots).toMatchObject({ ok: true, slotName: slot, found: true });
  });

  it('the watchdog finds the foreign connector\'s stored offset under its own topic.prefix when its slot is lost', async () => {
    // connector.topicPrefix is left at its default: the team's connector uses another one (run).
    expect(foreign.connector.topicPrefix).not.toBe(run);
    expect([202, 204]).toContain((await connect.put(`/connectors/${connector}/stop`, {})).status);
    await until('the slot is released', () => withClient('postgres', async (c) => (await c.query('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [slot])).rows as Array<{ active: boolean }>), (rows) => rows[0]?.active === false, 60_000);
    await withClient('postgres', (c) => c.query('SELECT pg_drop_replication_slot($1)', [slot]));
    const wd = createWatchdog({ config: foreign, deliver: false, instant: true });
    await wd.pollOnce();
    const missing = wd.statuses().find((s) => s.rule === 'SlotMissing' && s.slot === slot);
    await wd.stop(0);
    expect(missing?.level).toBe('critical');
    expect(missing?.summary).toMatch(/^SLOT_MISSING_AFTER_FAILOVER: slot .*stored offset \(LSN [0-9A-Fa-f]+\/[0-9A-Fa-f]+\)/);
  });
});
