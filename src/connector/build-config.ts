import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { databaseSslMode, type OutboxConfig } from '../config';
import { parse } from '../config/parse';
import { OutboxError } from '../errors';
import { PACKAGE_ROOT as PROJECT_ROOT, renderTemplate } from '../assets';
import { CONFIG_PROVIDER_REFERENCE, debeziumTopicName, isProviderReference, javaRegexLiteral, quoteIdent } from './escape';
import { checkExtra } from './extra-guard';

/**
 * The Debezium PostgreSQL connector + Outbox Event Router config, rendered from
 * connect/outbox-connector.json. Why each value (key names checked against Debezium 3.6.1's
 * `GET /connector-plugins/{PostgresConnector,EventRouter}/config` on the local stack and its source):
 *
 * Correctness
 * - plugin.name=pgoutput: the default is decoderbufs, which managed PostgreSQL does not ship.
 * - publication.autocreate.mode=disabled: `db:provision` owns the publication (outbox + heartbeat
 *   tables only); all_tables needs superuser and filtered would ALTER our publication.
 * - snapshot.mode=no_data: a snapshot emits existing outbox rows as op=r, which the SMT routes like
 *   inserts, re-publishing old events.
 * - skipped.operations=u,d,t: only inserts are events. Deletes (insert-then-delete cleanup) and the
 *   relay's published_at updates would only be dropped by the SMT (with a warning per update).
 * - tombstones.on.delete=false: no tombstone may reach an event topic.
 * - message.prefix.exclude.list=.*: logical decoding messages (pg_logical_emit_message, by any tool in
 *   the database) are not events; Debezium would publish them to `<prefix>.message`, and one larger than
 *   the producer's max.request.size fails the task (seen here: a 16 MiB message stopped the connector).
 * - table.field.additional.missing=error: a NULL traceparent/headers is a null header, not "missing";
 *   a missing column means the table is not ours, and failing the task (offsets not committed, nothing
 *   lost) beats silently dropping trace context.
 * - errors.tolerance=none: a record failing the SMT or a converter fails the task instead of vanishing.
 * - the predicate limits the SMT to the outbox topic `<topic.prefix>.<schema>.<table>` as Debezium
 *   sanitizes it; heartbeat records pass through untouched (as JSON, hence the `.type.` delegate).
 *
 * Latency and throughput. Where the time goes, read in Debezium 3.6.1's and Connect 4.3.1's classes:
 * PostgresStreamingChangeEventSource reads the replication stream without blocking and, after 5 empty
 * reads, sleeps poll.interval.ms; ChangeEventQueue.poll() returns only when max.batch.size records are
 * queued or poll.interval.ms has passed since the call; AbstractWorkerSourceTask then hands the records to
 * the producer at once (no wait of its own), which waits linger.ms. At low rates a record so waits up to
 * poll.interval.ms twice, plus linger.ms. Measured 2026-12-01 on the shared 2-core local stack (noisy: 3
 * other sessions compiling and testing; medians of 1-3 runs): a throw-away provisioned database, the
 * router CLI in its own process with a per-event JSON handler writing clock_timestamp() in its inbox
 * transaction, a writer process inserting one outbox row per autocommitted transaction at a fixed rate
 * with clock_timestamp() in the payload, the routed topic on LogAppendTime; 10 s warm-up, 20 s measured;
 * CPU from /proc/<pid>/stat over the measured window. "→ Kafka" is commit → broker append time.
 * - poll.interval.ms (config, 5; was 20, Debezium's default 500): → Kafka p50/p99 at 200/s: 20 ms
 *   23/48, 5 ms 6.3/19, 2 ms 4.2/24, 1 ms 3.9/19 (linger 0 for the last three); end to end p50 29 → 12-14.
 *   The price is Connect's idle CPU, two wake-ups per interval: 78 ms/s at 20, 174 at 5, 325 at 2,
 *   434 at 1 (0.43 of a core, on a 2-core box); Connect CPU per event at 1,000/s 197-268 µs
 *   at 20, 300-322 at 5, 404 at 2, 430-456 at 1. 5 meets the 10 ms p50 target with the least CPU; set
 *   20 where idle CPU matters more than 15 ms.
 * - producer.override.linger.ms (config, 0; was 5): → Kafka p50 at 200/s with poll 5: linger 5 11.7 ms,
 *   linger 0 6.3 ms; Kafka and Connect CPU per event at 1,000/s unchanged within noise (155 vs 150 µs,
 *   300 vs 322 µs). Connect's source producer has one request in flight, so records batch up while it is
 *   out: no linger is needed for throughput.
 * - producer.override.acks=all: Connect's default for source tasks (Connect 4.3.1's
 *   Worker.baseProducerConfigs puts acks=all, max.in.flight.requests.per.connection=1 and
 *   enable.idempotence=false, then the worker's `producer.*` over them, then the connector's
 *   `producer.override.*`), stated so a worker-level producer.acks cannot weaken it: with topics at
 *   min.insync.replicas 2 (src/topics/replication.ts) an acknowledged record is then on two brokers.
 *   Ordering holds with Connect's one request in flight and idempotence off. Tried and dropped: enable.idempotence=true with 5 in
 *   flight (→ Kafka p50 6.0/6.7 ms at 200/1,000/s against 6.3/6.6, no gain: the producer is not the limit).
 * - max.batch.size / max.queue.size (config, 2048/8192): Debezium's defaults, not varied: at ≤ 2,000/s a
 *   poll returns at the interval with ~10 records, far below the batch, and the queue never fills.
 *   Not on the path either: the worker's offset.flush.interval.ms (1 s; commits run beside the send
 *   loop), Debezium's status.update.interval.ms (10 s of standby status) and xmin.fetch.interval.ms (0: off).
 * - producer.override.batch.size=131072: with one request in flight per broker, bigger batches (not
 *   more waiting) carry the throughput; memory is only used by partitions that have records.
 * - producer.override.compression.type=none: lz4 would be the usual pick, but kafkajs 2.2.4 (the router)
 *   cannot read it ("KafkaJSNotImplemented: LZ4 compression not implemented", seen end to end), nor
 *   snappy or zstd without codec plugins; gzip costs CPU the 2-core box lacks, on Avro that compresses little.
 * - producer.override.max.request.size and topic.creation.default.max.message.bytes: the largest
 *   payload (outbox.maxPayloadBytes) plus 64 KiB for key and headers, never below Kafka's 1 MiB.
 * - slot.failover (connector.slotFailover, on unless `off`): a PostgreSQL 17+ failover slot, synchronized
 *   to standbys that run sync_replication_slots, so the slot (and the connector's position) survives a
 *   failover. Debezium 3.6.1 sets it only when it creates the slot, and only on 17+
 *   (PostgresReplicationConnection#useFailOverSlot: "Can't create a failover slot on Postgres before
 *   version 17. Continuing to create a non-failover slot"), so the same config serves every server and
 *   the build stays pure: connector:render prints what connector:deploy applies, whatever the version.
 * - heartbeat.interval.ms (config, 10 s) + heartbeat.action.query: an idle outbox still confirms a
 *   recent LSN, so the slot does not pin WAL; the heartbeat table is in the publication.
 */

export type ConnectorConfig = Readonly<Record<string, string>>;

/**
 * connector.exactlyOnce (KIP-618, Kafka Connect 3.3+). `required` makes Connect's validation check that
 * the worker has `exactly.once.source.support=enabled` and that the connector declares support
 * (Debezium 3.6's PostgresConnector does, for every config); a worker without it fails the deploy at
 * the validate step. `poll`: one transaction per batch the task returns, its source offset written to
 * Connect's offset topic in the same transaction. It is Connect's default, stated because Debezium
 * cannot define its own boundaries (`connector` would be refused). Without these two keys, a worker
 * with EOS enabled still runs the task transactionally (`requested` is Connect's default).
 */
export const EXACTLY_ONCE_PROPERTIES: Readonly<Record<string, string>> = Object.freeze({
  'exactly.once.support': 'required',
  'transaction.boundary': 'poll',
});

export const CONNECTOR_TEMPLATE = join(PROJECT_ROOT, 'connect', 'outbox-connector.json');

const HEADROOM_BYTES = 64 * 1024;
const KAFKA_DEFAULT_MAX_REQUEST = 1024 * 1024;
const PRODUCER_BATCH_BYTES = 128 * 1024;

/** -1 means "the broker's default" to Connect's topic creation. */
const topicCount = z.number().int().refine((n) => n === -1 || n >= 1, 'a positive integer, or -1 for the broker default');

export const connectorBuildOptionsSchema = z
  .object({
    /** Extra or overriding connector properties for power users; checked by the guard rails. */
    extra: z.record(z.string().regex(/^[A-Za-z0-9._-]+$/, 'property names are letters, digits, ".", "_" and "-"'), z.string()).default({}),
    /** Lets `extra` override settings the guard rails refuse (the CLI's --force). Plain-text secrets stay refused. */
    allowUnsafe: z.boolean().default(false),
    /** Partitions of the topics Connect creates (routed outbox topics, heartbeat topic). */
    topicPartitions: topicCount.default(3),
    /**
     * Replication factor of those topics. Default -1: the brokers' default.replication.factor, which is
     * what the cluster's operator chose (1 on the one-broker local stack, 3 on its cluster profile and on
     * any production cluster worth the name); on 3+ brokers the replication guard refuses less than 3.
     */
    topicReplicationFactor: topicCount.default(-1),
    /** The database as the Connect worker reaches it, when that differs from config.database (compose: postgres:5432). */
    databaseHost: z.string().min(1).optional(),
    databasePort: z.number().int().min(1).max(65535).optional(),
    /**
     * Replaces connector.passwordRef for a worker with other config providers: `connector:render --format
     * strimzi` puts Strimzi's `${secrets:<namespace>/<secret>:<key>}` here. Still only a reference.
     */
    passwordRef: z.string().refine(isProviderReference, 'a config provider reference such as ${secrets:namespace/secret:key}').optional(),
  })
  .strict();

export type ConnectorBuildOptions = z.input<typeof connectorBuildOptionsSchema>;

let templateText: string | undefined;

function template(): string {
  templateText ??= readFileSync(CONNECTOR_TEMPLATE, 'utf8');
  return templateText;
}

/** The heartbeat upsert: idempotent, every identifier quoted. The row id is fixed at 1 (the table's CHECK). */
export function heartbeatQuery(schema: string, table: string): string {
  const target = `${quoteIdent(schema)}.${quoteIdent(table)}`;
  return `INSERT INTO ${target} (id, beat_at) VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET beat_at = EXCLUDED.beat_at`;
}

/** The topic Debezium writes outbox changes to, before the SMT re-routes them. */
export function outboxSourceTopic(config: OutboxConfig): string {
  return debeziumTopicName(config.connector.topicPrefix, config.outbox.schema, config.outbox.table);
}

function invalid(message: string, code: 'CONFIG_INVALID' | 'FLAG_INVALID' = 'CONFIG_INVALID'): OutboxError {
  return new OutboxError(code, `${message} Nothing was deployed.`);
}

/** Debezium creates failover slots from this PostgreSQL version on. */
export const FAILOVER_SLOT_VERSION = 170_000;

/** What pgoutput's publication_names accepts unquoted, and what survives Debezium's '%s' literal: lower-case plain identifiers. */
const PLAIN_PUBLICATION = /^[a-z_][a-z0-9_]*$/;

/**
 * Names db:provision escapes everywhere but Debezium 3.6 does not: it passes publication.name raw as
 * pgoutput's `publication_names` option (a comma-separated identifier list: unquoted names fold to
 * lower case, a space or quote is a syntax error, "invalid publication_names syntax", retried until the
 * task fails) and formats it into `SELECT puballtables FROM pg_publication WHERE pubname = '%s'`; and a
 * single quote or backslash in the connecting user's name breaks its validation query ("syntax error").
 * Seen on the local stack (test/integration/security-identifiers.test.ts); refused here, before a
 * connector is deployed that could never stream.
 */
export function debeziumNameProblems(config: OutboxConfig): string[] {
  const problems: string[] = [];
  const { publication } = config.outbox;
  if (!PLAIN_PUBLICATION.test(publication)) {
    problems.push(
      `outbox.publication (${JSON.stringify(publication)}) cannot be streamed by Debezium, which passes it unquoted to pgoutput (publication_names folds case and splits on commas) ` +
        'and into a SQL string literal: use lower-case letters, digits and _ only (OUTBOX_PUBLICATION), and run db:provision again.',
    );
  }
  if (/['\\]/.test(config.roles.cdc)) {
    problems.push(
      `roles.cdc (${JSON.stringify(config.roles.cdc)}) contains a single quote or backslash, which Debezium puts into SQL text unescaped: choose another CDC role name (OUTBOX_CDC_ROLE).`,
    );
  }
  return problems;
}

/**
 * Builds the connector config from the resolved configuration. Pure: same input, same output; every
 * value is a string, as Kafka Connect stores them. The password is always a config-provider reference.
 */
export function buildConnectorConfig(config: OutboxConfig, options: ConnectorBuildOptions = {}): ConnectorConfig {
  const opts = parse(connectorBuildOptionsSchema, options, { heading: 'Invalid connector build options (--partitions, --replication-factor, --set)', code: 'FLAG_INVALID' });
  const { connector, outbox, database, roles } = config;

  // Values embedded raw would be resolved by Connect's config providers if they held `${a:b}`.
  const raw: Record<string, string> = {
    'outbox.schema': outbox.schema,
    'outbox.table': outbox.table,
    'outbox.heartbeatTable': outbox.heartbeatTable,
    'outbox.publication': outbox.publication,
    'roles.cdc': roles.cdc,
    'database.database': database.database,
    'connector.topicReplacement': connector.topicReplacement,
  };
  for (const [path, value] of Object.entries(raw)) {
    if (CONFIG_PROVIDER_REFERENCE.test(value)) {
      throw invalid(`${path} (${JSON.stringify(value)}) contains a \${provider:key} reference, which Kafka Connect would replace; rename it.`);
    }
  }
  const nameProblems = debeziumNameProblems(config);
  if (nameProblems.length > 0) throw invalid(nameProblems.join(' '));
  if (connector.maxQueueSize <= connector.maxBatchSize) {
    throw invalid(
      `connector.maxQueueSize (${connector.maxQueueSize}) must be larger than connector.maxBatchSize (${connector.maxBatchSize}), as Debezium requires.`,
    );
  }

  const maxRequestSize = Math.max(KAFKA_DEFAULT_MAX_REQUEST, outbox.maxPayloadBytes + HEADROOM_BYTES);
  const values: Record<string, string | number> = {
    name: connector.name,
    databaseHost: opts.databaseHost ?? database.host,
    databasePort: opts.databasePort ?? database.port,
    databaseUser: roles.cdc,
    passwordRef: opts.passwordRef ?? connector.passwordRef,
    databaseName: database.database,
    databaseSslMode: databaseSslMode(database),
    topicPrefix: connector.topicPrefix,
    publication: outbox.publication,
    slotName: connector.slotName,
    slotFailover: 'true',
    tableIncludeList: `${javaRegexLiteral(outbox.schema)}\\.${javaRegexLiteral(outbox.table)}`,
    heartbeatIntervalMs: connector.heartbeatIntervalMs,
    heartbeatActionQuery: heartbeatQuery(outbox.schema, outbox.heartbeatTable),
    pollIntervalMs: connector.pollIntervalMs,
    maxBatchSize: connector.maxBatchSize,
    maxQueueSize: connector.maxQueueSize,
    producerLingerMs: connector.producerLingerMs,
    producerBatchSize: PRODUCER_BATCH_BYTES,
    maxRequestSize,
    topicPartitions: opts.topicPartitions,
    topicReplicationFactor: opts.topicReplicationFactor,
    // Filled as a value, so the EventRouter's own ${routedByValue} survives the one-pass render.
    topicReplacement: connector.topicReplacement,
    outboxTopicPattern: javaRegexLiteral(outboxSourceTopic(config)),
  };
  // Values go inside JSON strings: escape them as JSON before rendering.
  const jsonSafe = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, JSON.stringify(String(v)).slice(1, -1)]));
  const rendered = JSON.parse(renderTemplate(template(), jsonSafe, CONNECTOR_TEMPLATE)) as Record<string, string>;

  Object.assign(rendered, databaseTlsProperties(config));
  if (connector.heartbeatIntervalMs === 0) delete rendered['heartbeat.action.query'];
  if (connector.slotFailover === 'off') delete rendered['slot.failover'];
  if (connector.exactlyOnce) Object.assign(rendered, EXACTLY_ONCE_PROPERTIES);
  checkExtra(rendered, opts.extra, opts.allowUnsafe);
  return Object.freeze({ ...rendered, ...opts.extra });
}

/**
 * Debezium's side of database TLS, beside `database.sslmode`: the CA to verify the server with (pgjdbc's
 * own default is ~/.postgresql/root.crt of the worker's user, which nobody means), else, when the mode
 * verifies, Java's truststore through pgjdbc's DefaultJavaSSLFactory.
 */
function databaseTlsProperties(config: OutboxConfig): Record<string, string> {
  const mode = databaseSslMode(config.database);
  if (mode === 'disable') return {};
  const rootCert = config.connector.sslRootCert ?? config.database.sslRootCert;
  if (rootCert) return { 'database.sslrootcert': rootCert };
  return mode === 'require' ? {} : { 'database.sslfactory': 'org.postgresql.ssl.DefaultJavaSSLFactory' };
}

/** What `connector:deploy` applies and `connector:render` prints: the build options with `force`. */
export interface DesiredConnectorOptions {
  build?: Omit<ConnectorBuildOptions, 'allowUnsafe'>;
  /** The deploy's --force: `build.extra` may then override what the guard rails refuse. */
  force?: boolean;
}

/**
 * The connector config a deploy with these options writes. The one path from deploy options to
 * buildConnectorConfig, so that a rendered config is byte for byte what the deploy would apply.
 */
export function desiredConnectorConfig(config: OutboxConfig, options: DesiredConnectorOptions = {}): ConnectorConfig {
  return buildConnectorConfig(config, { ...options.build, allowUnsafe: options.force ?? false });
}
