/** src/connector/build-config.ts and connect/outbox-connector.json: the rendered connector config. */
import { readFileSync } from 'node:fs';
import { loadConfig, type OutboxOptions } from '../../../src/config';
import { buildConnectorConfig, CONNECTOR_TEMPLATE, heartbeatQuery, outboxSourceTopic } from '../../../src/connector';
import { thrown } from '../../support/expect-error';

const config = (overrides: OutboxOptions = {}) => loadConfig({ env: {}, overrides });


/** A Java regex as used by Connect/Debezium (Matcher.matches: anchored), run in JS: \x{H} is \u{H} there. */
function javaMatches(pattern: string, text: string): boolean {
  return new RegExp(`^(?:${pattern.replace(/\\x\{([0-9A-F]+)\}/g, '\\u{$1}')})$`, 'u').test(text);
}

describe('buildConnectorConfig with defaults', () => {
  const built = buildConnectorConfig(config());

  it('sets every key the outbox contract relies on', () => {
    expect(built).toMatchObject({
      name: 'outbox-connector',
      'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
      'tasks.max': '1',
      'plugin.name': 'pgoutput',
      'database.hostname': '127.0.0.1',
      'database.port': '55432',
      'database.user': 'outbox_cdc',
      'database.dbname': 'app',
      'topic.prefix': 'outbox',
      'publication.name': 'outbox_publication',
      'publication.autocreate.mode': 'disabled',
      'slot.name': 'outbox_slot',
      'table.include.list': 'public\\.outbox',
      'snapshot.mode': 'no_data',
      'tombstones.on.delete': 'false',
      'heartbeat.interval.ms': '10000',
      'poll.interval.ms': '5',
      'max.batch.size': '2048',
      'max.queue.size': '8192',
      'producer.override.linger.ms': '0',
      'producer.override.acks': 'all',
      'producer.override.compression.type': 'none',
      'key.converter': 'org.apache.kafka.connect.storage.StringConverter',
      'value.converter': 'io.debezium.converters.BinaryDataConverter',
      transforms: 'outbox',
      'transforms.outbox.type': 'io.debezium.transforms.outbox.EventRouter',
      'transforms.outbox.table.field.event.id': 'id',
      'transforms.outbox.table.field.event.key': 'aggregate_id',
      'transforms.outbox.table.field.event.payload': 'payload',
      'transforms.outbox.route.by.field': 'aggregate_type',
      'transforms.outbox.table.fields.additional.placement':
        'event_type:header:eventType,content_type:header:contentType,traceparent:header:traceparent,headers:header:headers',
      'transforms.outbox.table.field.additional.missing': 'error',
      'transforms.outbox.predicate': 'isOutboxTable',
      predicates: 'isOutboxTable',
      'predicates.isOutboxTable.type': 'org.apache.kafka.connect.transforms.predicates.TopicNameMatches',
      'predicates.isOutboxTable.pattern': 'outbox\\.public\\.outbox',
      'topic.creation.default.replication.factor': '-1',
      'topic.creation.default.partitions': '3',
    });
  });

  it('configures the BinaryDataConverter delegate under the `.type.` prefix, not the docs\' prefix without it', () => {
    expect(built['value.converter.delegate.converter.type']).toBe('org.apache.kafka.connect.json.JsonConverter');
    expect(built['value.converter.delegate.converter.type.schemas.enable']).toBe('false');
    expect(Object.keys(built).filter((k) => k.startsWith('value.converter.delegate.converter.') && !k.startsWith('value.converter.delegate.converter.type'))).toEqual([]);
  });

  it('keeps the EventRouter\'s own ${routedByValue} literally', () => {
    expect(built['transforms.outbox.route.topic.replacement']).toBe('outbox.event.${routedByValue}');
  });

  it('stores a config-provider reference as the password, never the password', () => {
    const withSecret = buildConnectorConfig(config({ roles: { cdcPassword: 'S3cr3t-value-zz' }, database: { password: 'Adm1n-value-zz' } }));
    expect(withSecret['database.password']).toBe('${env:OUTBOX_CDC_PASSWORD}');
    const text = JSON.stringify(withSecret);
    expect(text).not.toContain('S3cr3t-value-zz');
    expect(text).not.toContain('Adm1n-value-zz');
  });

  it('returns a frozen map of strings only', () => {
    expect(Object.isFrozen(built)).toBe(true);
    for (const value of Object.values(built)) expect(typeof value).toBe('string');
  });

  it('leaves no template placeholder unfilled', () => {
    const leftovers = Object.values(built).flatMap((v) => v.match(/\$\{[A-Za-z]+\}/g) ?? []);
    expect(leftovers).toEqual(['${routedByValue}']);
  });

  it('aligns the producer request size and the topics\' max.message.bytes with maxPayloadBytes, never below 1 MiB', () => {
    expect(built['producer.override.max.request.size']).toBe(String(1024 * 1024));
    const big = buildConnectorConfig(config({ outbox: { maxPayloadBytes: 2 * 1024 * 1024 } }));
    expect(big['producer.override.max.request.size']).toBe(String(2 * 1024 * 1024 + 64 * 1024));
    expect(big['topic.creation.default.max.message.bytes']).toBe(big['producer.override.max.request.size']);
  });
});

describe('the template file', () => {
  it('fills the topic replacement as a value instead of containing ${routedByValue}', () => {
    const text = readFileSync(CONNECTOR_TEMPLATE, 'utf8');
    expect(text).toContain('"transforms.outbox.route.topic.replacement": "${topicReplacement}"');
    expect(text).not.toContain('routedByValue');
    expect(() => JSON.parse(text)).not.toThrow();
  });
});

describe('hostile identifiers', () => {
  const hostile = config({
    outbox: { schema: 'we"ird.sch', table: 'we"ird.tab le', heartbeatTable: 'hb "x', publication: 'pub_1' },
  });
  const built = buildConnectorConfig(hostile);

  it('escapes the include list so it matches exactly schema.table, without comma, space or unescaped dot', () => {
    const list = built['table.include.list'] as string;
    expect(list).toBe('we\\x{22}ird\\.sch\\.we\\x{22}ird\\.tab\\x{20}le');
    expect(list).not.toMatch(/[ ,]/);
    expect(javaMatches(list, 'we"ird.sch.we"ird.tab le')).toBe(true);
    expect(javaMatches(list, 'we"irdXsch.we"ird.tab le')).toBe(false);
    expect(javaMatches(list, 'we"ird.sch.we"ird.tab lee')).toBe(false);
  });

  it('matches the predicate to the topic name Debezium sanitizes the table to, and only that', () => {
    expect(outboxSourceTopic(hostile)).toBe('outbox.we_ird.sch.we_ird.tab_le');
    const pattern = built['predicates.isOutboxTable.pattern'] as string;
    expect(pattern).toBe('outbox\\.we_ird\\.sch\\.we_ird\\.tab_le');
    expect(javaMatches(pattern, 'outbox.we_ird.sch.we_ird.tab_le')).toBe(true);
    expect(javaMatches(pattern, 'outboxXwe_ird.sch.we_ird.tab_le')).toBe(false);
    expect(javaMatches(pattern, '__debezium-heartbeat.outbox')).toBe(false);
  });

  it('quotes every identifier of the heartbeat upsert', () => {
    expect(built['heartbeat.action.query']).toBe(
      'INSERT INTO "we""ird.sch"."hb ""x" (id, beat_at) VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET beat_at = EXCLUDED.beat_at',
    );
    expect(heartbeatQuery('public', 'outbox_heartbeat')).toContain('INSERT INTO "public"."outbox_heartbeat"');
  });

  it('passes a plain publication name through verbatim', () => {
    expect(built['publication.name']).toBe('pub_1');
  });

  it.each(['pub, "1"', 'Pub_1', 'pub 1', "pub'1", 'pub"1'])(
    'refuses publication %j, which Debezium passes unquoted to pgoutput and into a SQL literal (seen failing on the stack)',
    (publication) => {
      const error = thrown(() => buildConnectorConfig(config({ outbox: { publication } })));
      expect(error.code).toBe('CONFIG_INVALID');
      expect(error.message).toContain('outbox.publication');
      expect(error.message).toContain('lower-case letters, digits and _');
      expect(error.message).toContain('Nothing was deployed');
    },
  );

  it("refuses a CDC role name with a single quote or backslash (Debezium's validation query breaks on it), and accepts double quotes and spaces", () => {
    for (const cdc of ["cdc'x", 'cdc\\x']) {
      const error = thrown(() => buildConnectorConfig(config({ roles: { cdc } })));
      expect(error.code).toBe('CONFIG_INVALID');
      expect(error.message).toContain('roles.cdc');
    }
    expect(buildConnectorConfig(config({ roles: { cdc: 'Cdc "r" x' } }))['database.user']).toBe('Cdc "r" x');
  });

  it('refuses names Connect would resolve as ${provider:key} references', () => {
    const error = thrown(() => buildConnectorConfig(config({ outbox: { table: 'x${env:HOME}' } })));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('outbox.table');
  });
});

describe('settings', () => {
  it('drops the heartbeat query when heartbeats are off', () => {
    const built = buildConnectorConfig(config({ connector: { heartbeatIntervalMs: 0 } }));
    expect(built['heartbeat.interval.ms']).toBe('0');
    expect(built).not.toHaveProperty(['heartbeat.action.query']);
  });

  it('uses the database address the Connect worker sees, and topic counts, from the options', () => {
    const built = buildConnectorConfig(config(), { databaseHost: 'postgres', databasePort: 5432, topicPartitions: -1, topicReplicationFactor: 3 });
    expect(built).toMatchObject({ 'database.hostname': 'postgres', 'database.port': '5432', 'topic.creation.default.partitions': '-1', 'topic.creation.default.replication.factor': '3' });
  });

  it('latency: Debezium polls every 5 ms and the Connect producer does not linger, unless configured otherwise', () => {
    expect(buildConnectorConfig(config())).toMatchObject({ 'poll.interval.ms': '5', 'producer.override.linger.ms': '0' });
    const tuned = buildConnectorConfig(config({ connector: { pollIntervalMs: 20, producerLingerMs: 5 } }));
    expect(tuned).toMatchObject({ 'poll.interval.ms': '20', 'producer.override.linger.ms': '5' });
  });

  it('durability: acks=all is set explicitly, and Connect keeps one request in flight (no in-flight or idempotence override)', () => {
    const built = buildConnectorConfig(config());
    expect(built['producer.override.acks']).toBe('all');
    expect(built).not.toHaveProperty(['producer.override.max.in.flight.requests.per.connection']);
    expect(built).not.toHaveProperty(['producer.override.enable.idempotence']);
  });

  it('exactly-once: off by default (no KIP-618 keys); on, it requires worker support with one transaction per poll', () => {
    const plain = buildConnectorConfig(config());
    expect(plain).not.toHaveProperty(['exactly.once.support']);
    expect(plain).not.toHaveProperty(['transaction.boundary']);
    const eos = buildConnectorConfig(config({ connector: { exactlyOnce: true } }));
    expect(eos).toMatchObject({ 'exactly.once.support': 'required', 'transaction.boundary': 'poll' });
    // Everything else is the same config: acks=all stays, Connect itself turns on idempotence and the transactional id.
    const { 'exactly.once.support': _s, 'transaction.boundary': _b, ...rest } = eos;
    expect(rest).toEqual({ ...plain });
    expect(loadConfig({ env: { OUTBOX_CONNECTOR_EXACTLY_ONCE: 'true' } }).connector.exactlyOnce).toBe(true);
  });

  it('rejects a zero partition count and a queue not larger than the batch', () => {
    expect(thrown(() => buildConnectorConfig(config(), { topicPartitions: 0 })).code).toBe('FLAG_INVALID');
    const error = thrown(() => buildConnectorConfig(config({ connector: { maxBatchSize: 4096, maxQueueSize: 4096 } })));
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toContain('maxQueueSize (4096)');
  });
});

describe('guard rails on extra', () => {
  it.each([
    ['plugin.name', 'decoderbufs'],
    ['publication.autocreate.mode', 'all_tables'],
    ['publication.autocreate.mode', 'filtered'],
    ['snapshot.mode', 'initial'],
    ['snapshot.mode', 'always'],
    ['slot.drop.on.stop', 'true'],
    ['errors.tolerance', 'all'],
    ['producer.override.compression.type', 'lz4'],
    ['transforms', 'other'],
    ['value.converter', 'org.apache.kafka.connect.json.JsonConverter'],
  ])('refuses %s=%s unless allowed, naming the key', (key, value) => {
    const error = thrown(() => buildConnectorConfig(config(), { extra: { [key]: value } }));
    expect(error.code).toBe('CONNECTOR_UNSAFE');
    expect(error.message).toContain(`${key}=${value}`);
    expect(error.message).toContain('--force');
    expect(buildConnectorConfig(config(), { extra: { [key]: value }, allowUnsafe: true })[key]).toBe(value);
  });

  it('accepts safe values and harmless extra properties', () => {
    const built = buildConnectorConfig(config(), {
      extra: { 'snapshot.mode': 'never', 'plugin.name': 'pgoutput', 'slot.max.retries': '10', 'producer.override.compression.type': 'gzip' },
    });
    expect(built).toMatchObject({ 'snapshot.mode': 'never', 'slot.max.retries': '10', 'producer.override.compression.type': 'gzip' });
  });

  it('never stores a plain-text secret, even when forced, and never echoes it', () => {
    for (const key of ['database.password', 'database.sslpassword']) {
      const error = thrown(() => buildConnectorConfig(config(), { extra: { [key]: 'hunter2-plain' }, allowUnsafe: true }));
      expect(error.code).toBe('CONNECTOR_PROPERTY_FORBIDDEN');
      expect(error.message).toContain(key);
      expect(error.message).not.toContain('hunter2-plain');
    }
    expect(buildConnectorConfig(config(), { extra: { 'database.password': '${file:/run/secrets/pg:cdc}' } })['database.password']).toBe(
      '${file:/run/secrets/pg:cdc}',
    );
  });

  it('never lets extra rename the connector or change its class', () => {
    expect(thrown(() => buildConnectorConfig(config(), { extra: { name: 'other' }, allowUnsafe: true })).code).toBe('CONNECTOR_PROPERTY_FORBIDDEN');
    expect(thrown(() => buildConnectorConfig(config(), { extra: { 'connector.class': 'x.Y' }, allowUnsafe: true })).code).toBe('CONNECTOR_PROPERTY_FORBIDDEN');
  });

  it('rejects malformed property names', () => {
    expect(thrown(() => buildConnectorConfig(config(), { extra: { 'bad key': 'x' } })).code).toBe('FLAG_INVALID');
  });
});

describe('slot.failover (connector.slotFailover)', () => {
  const failover = (slotFailover: 'auto' | 'on' | 'off') => buildConnectorConfig(config({ connector: { slotFailover } }))['slot.failover'];

  it('auto and on render slot.failover=true (Debezium applies it on 17+ and ignores it before), off leaves it out', () => {
    expect(failover('auto')).toBe('true');
    expect(failover('on')).toBe('true');
    expect(failover('off')).toBeUndefined();
  });

  it('is in the template as a string, as Connect stores every value', () => {
    expect(readFileSync(CONNECTOR_TEMPLATE, 'utf8')).toContain('"slot.failover": "${slotFailover}"');
  });
});
