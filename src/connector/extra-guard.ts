import { OutboxError } from '../errors';
import { isSecretKey, redactValue } from '../log/redact';
import { isProviderReference } from './escape';

/**
 * Guard rails for `extra`, the power users' connector properties. Some overrides are never allowed
 * (they would store a secret or rename what we deploy); the rest are refused unless forced, each
 * with the reason it loses, duplicates or re-publishes events.
 */

export interface ExtraRefusal {
  key: string;
  value: string;
  reason: string;
}


/** Keys outbox-router sets itself, whatever `--force` says. */
const FIXED: Record<string, string> = {
  name: 'the connector name comes from connector.name (OUTBOX_CONNECTOR_NAME)',
  'connector.class': 'outbox-router deploys io.debezium.connector.postgresql.PostgresConnector only',
};

type Rule = (value: string) => string | undefined;

/** Per-key rules: return the reason to refuse, or undefined when the value is safe. */
const RULES: Record<string, Rule> = {
  'plugin.name': (v) =>
    v === 'pgoutput' ? undefined : 'only pgoutput is built into PostgreSQL; decoderbufs is missing on managed services (RDS, Cloud SQL, Azure)',
  'publication.autocreate.mode': (v) =>
    v === 'disabled'
      ? undefined
      : 'db:provision owns the publication: all_tables needs superuser and captures every table, filtered rewrites our publication',
  'snapshot.mode': (v) =>
    v === 'no_data' || v === 'never' ? undefined : 'a snapshot routes every existing outbox row like an insert and re-publishes old events',
  'slot.drop.on.stop': (v) =>
    v.trim().toLowerCase() === 'true' ? 'each stop drops the slot; the next start skips what was written meanwhile (DBZ-5739)' : undefined,
  'errors.tolerance': (v) => (v === 'none' ? undefined : 'records failing the SMT or converter would be dropped silently'),
  'tombstones.on.delete': (v) => (v.trim().toLowerCase() === 'false' ? undefined : 'tombstones must never reach event topics'),
  'producer.override.compression.type': (v) =>
    ['none', 'gzip'].includes(v) ? undefined : 'kafkajs (the router) cannot decode lz4, snappy or zstd batches without codec plugins: consumers would crash',
  'event.processing.failure.handling.mode': (v) =>
    v.trim().toLowerCase() === 'fail'
      ? undefined
      : 'Debezium would skip a change event it cannot process (warn only logs it, skip not even that): an outbox row is lost without the task failing',
  'header.converter': (v) =>
    v.trim() === 'org.apache.kafka.connect.storage.SimpleHeaderConverter'
      ? undefined
      : 'the router reads the id, eventType, contentType, traceparent and headers headers as plain strings (Connect\'s SimpleHeaderConverter); another converter changes their bytes',
};

/** Rules for families of keys: [pattern, rule]. */
const PATTERN_RULES: Array<[RegExp, Rule]> = [
  [
    /^topic\.creation\.[^.]+\.cleanup\.policy$/,
    (v) =>
      v.toLowerCase().includes('compact')
        ? 'a compacted topic keeps only the latest record per key (aggregate_id), so older events of an aggregate are deleted before every consumer has read them'
        : undefined,
  ],
  [/^header\.converter\./, () => 'header.converter settings change the bytes of the record headers the router reads as plain strings'],
];

function ruleFor(key: string): Rule | undefined {
  return RULES[key] ?? PATTERN_RULES.find(([pattern]) => pattern.test(key))?.[1];
}

/** Keys (and prefixes) that define the record contract or the objects guard rails inspect. */
const CONTRACT_KEYS = ['slot.name', 'publication.name', 'table.include.list', 'topic.prefix', 'key.converter', 'skipped.operations'];
const CONTRACT_PREFIXES = ['value.converter', 'transforms', 'predicates'];

function contractReason(key: string): string | undefined {
  if (CONTRACT_KEYS.includes(key) || CONTRACT_PREFIXES.some((p) => key === p || key.startsWith(`${p}.`))) {
    return 'it changes the record contract or the objects outbox-router checks (docs/operations.md, "The outbox table, topics and headers"); set it through the outbox config instead';
  }
  return undefined;
}

/** Refusals that `--force` may override, for the keys `extra` sets. */
export function unsafeExtra(base: Readonly<Record<string, string>>, extra: Readonly<Record<string, string>>): ExtraRefusal[] {
  const out: ExtraRefusal[] = [];
  for (const [key, value] of Object.entries(extra)) {
    if (base[key] === value) continue;
    const reason = ruleFor(key)?.(value) ?? contractReason(key);
    if (reason) out.push({ key, value, reason });
  }
  return out;
}

/** Throws for any refusal: CONNECTOR_PROPERTY_FORBIDDEN for the never-allowed ones, CONNECTOR_UNSAFE unless `allowUnsafe`. */
export function checkExtra(base: Readonly<Record<string, string>>, extra: Readonly<Record<string, string>>, allowUnsafe: boolean): void {
  const fixed: string[] = [];
  for (const [key, value] of Object.entries(extra)) {
    if (FIXED[key] && base[key] !== value) fixed.push(`  - ${key}: ${FIXED[key]}`);
    if (isSecretKey(key) && !isProviderReference(value)) {
      fixed.push(`  - ${key}: secrets must be config-provider references such as \${env:NAME} or \${file:/path:key}; a plain value would be stored in Kafka's config topic`);
    }
  }
  if (fixed.length > 0) {
    throw new OutboxError('CONNECTOR_PROPERTY_FORBIDDEN', `These extra connector properties are never allowed; nothing was deployed:\n${fixed.join('\n')}`, {
      details: { keys: fixed.length },
    });
  }
  const refusals = unsafeExtra(base, extra);
  if (refusals.length === 0 || allowUnsafe) return;
  const lines = refusals.map((r) => `  - ${r.key}=${redactValue(r.key, r.value)}: ${r.reason}`);
  throw new OutboxError(
    'CONNECTOR_UNSAFE',
    `Refusing extra connector properties that can lose, duplicate or re-publish events; nothing was deployed:\n${lines.join('\n')}\n` +
      'Remove them, or deploy with --force (force: true) if you accept the consequence.',
    { details: { refusals: refusals.map((r) => ({ key: r.key, reason: r.reason })) } },
  );
}
