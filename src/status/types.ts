/**
 * The JSON of `outbox status --json`: plain data only (numbers, strings, booleans, arrays), so
 * `JSON.parse(JSON.stringify(status))` deep-equals it. Secrets never appear: targets are named by
 * user@host:port, and credentials in URLs are masked.
 */

import type { SlotRow as SampledSlot } from '../watchdog/slot-query';
import type { SlotReadiness } from '../watchdog/failover-rules';
import type { PartitionChange } from '../topics/partition-record';

export type Level = 'OK' | 'WARNING' | 'CRITICAL';

/** A section either holds its data (`ok: true`) or says why it could not be read and how to fix it. */
export type Section<T> = (T & { ok: true; ms: number }) | { ok: false; ms: number; error: string };

export interface Verdict {
  level: Level;
  /** 0 OK, 1 WARNING, 2 CRITICAL. */
  exitCode: 0 | 1 | 2;
  reasons: Array<{ level: Exclude<Level, 'OK'>; message: string }>;
}

export interface StackServiceInfo {
  name: string;
  running: boolean;
  ready: boolean;
  pid: number | null;
  ports: number[];
  rssBytes: number;
  detail: string;
}

export interface StackData {
  /** True when the configuration points at the local stack and something answers on its ports on this machine. */
  local: boolean;
  /** Why it is not the local stack, when `local` is false. */
  note: string | null;
  services: StackServiceInfo[];
}

export interface TaskInfo {
  id: number;
  state: string;
  worker: string;
  /** First line of the trace of a FAILED task. */
  trace: string | null;
}

export interface ConnectorData {
  name: string;
  url: string;
  deployed: boolean;
  state: string | null;
  worker: string | null;
  trace: string | null;
  tasks: TaskInfo[];
  /** slot.name of the deployed connector's stored config (null when not deployed). */
  slotName: string | null;
}

/** One slot as `outbox status` reports it: a projection of the one slot sample (src/watchdog/slot-query.ts). */
export type SlotRow = Pick<SampledSlot, 'plugin' | 'database' | 'active' | 'activePid' | 'walStatus' | 'retainedBytes'> & {
  name: string;
  /** The slot of config.connector.slotName; other logical slots are listed too (they retain WAL as well). */
  configured: boolean;
  /** SampledSlot.flushLagBytes: not yet confirmed by the consumer (current LSN − confirmed_flush_lsn). */
  confirmedLagBytes: number | null;
  /** SampledSlot.safeWalSize: bytes that can still be written before the slot is in danger of losing WAL; null when unlimited. */
  safeWalSizeBytes: number | null;
};

/** One failover slot of the primary as the standby has it (src/watchdog/failover-rules.ts). */
export type StandbySlotReadiness = SlotReadiness;

/**
 * The standby's readiness for a failover (watchdog.standby.databaseUrl): `configured: false` without the
 * setting; else per failover slot of the primary whether the standby holds a synced copy, or why the
 * standby could not be read. `target` is host:port/database, never the URL.
 */
export type StandbyData =
  | { configured: false }
  | { configured: true; target: string; error?: string; inRecovery?: boolean; slots: StandbySlotReadiness[] };

export interface SlotsData {
  /** The deployed connector's slot.name, else config.connector.slotName. */
  slotName: string;
  /** Whether that slot exists (it is then the first row). */
  found: boolean;
  slots: SlotRow[];
  standby: StandbyData;
}

export interface PartitionLag {
  partition: number;
  /** null: the group has committed nothing for this partition. */
  committed: number | null;
  low: number;
  high: number;
  lag: number;
}

export interface TopicLag {
  topic: string;
  /** Sum over partitions of high watermark − max(committed, low watermark). */
  lag: number;
  partitions: PartitionLag[];
}

export interface GroupInfo {
  groupId: string;
  /** Named by --group (or the default `outbox-router`), rather than found by its topics. */
  requested: boolean;
  /** Stable | Empty | PreparingRebalance | CompletingRebalance | Dead (no such group) … */
  state: string;
  members: number;
  /** clientId@host of each member. */
  clients: string[];
  totalLag: number;
  topics: TopicLag[];
}

export interface GroupsData {
  /** The routed-topic pattern used to find groups (from connector.topicReplacement). */
  topicPattern: string;
  groups: GroupInfo[];
}

export interface DlqTopic {
  topic: string;
  partitions: number;
  /** Records retained: high − low watermark summed over partitions. */
  depth: number;
  /** The topic's retention.ms: -1 keeps dead letters for good; anything else lets them expire. null: not readable. */
  retentionMs: number | null;
}

export interface DlqData {
  topicPattern: string;
  total: number;
  topics: DlqTopic[];
}

export interface ParkedKey {
  consumer: string;
  aggregateType: string;
  aggregateId: string;
  /** Dead-lettered events of the key waiting for a replay. */
  events: number;
  /** The key's earliest parked event (smallest seq): the one `outbox dlq:replay` must apply first. */
  headEventId: string;
  headErrorCode: string;
  /** When the key's first still-parked event was parked (ISO 8601). */
  since: string;
}

export interface ParkedData {
  /** The router's parked-keys table, schema-qualified. */
  table: string;
  /** False when the table does not exist (the database is not provisioned): nothing can be parked. */
  provisioned: boolean;
  totalKeys: number;
  totalEvents: number;
  /** When the longest-parked key was parked, over every key (ISO 8601); null when none is. */
  oldestSince: string | null;
  /** How long ago that was by the database's clock (ms); null when none is parked. */
  oldestAgeMs: number | null;
  /** At most this many keys are listed, the most events first (--parked-limit). */
  limit: number;
  keys: ParkedKey[];
}

/** The outbox table's health: one projection of the outbox sample (src/watchdog/outbox-query.ts). */
export interface OutboxTableData {
  /** `schema.table` as configured. */
  table: string;
  /** False when the table does not exist (the database is not provisioned): every value is null. */
  provisioned: boolean;
  /** pg_stat_user_tables.n_live_tup: an estimate. */
  estimatedRows: number | null;
  /** pg_total_relation_size: heap, indexes and TOAST. */
  totalBytes: number | null;
  deadTuples: number | null;
  /** ISO 8601; null when never. */
  lastAutovacuum: string | null;
  lastVacuum: string | null;
  /**
   * Age of the oldest row with published_at IS NULL, seconds (0: none). With the polling relay the
   * oldest unpublished event; with CDC, which never sets published_at, the oldest row not cleaned up yet.
   */
  oldestPendingAgeSeconds: number | null;
  /** Rows with published_at IS NULL, counted up to 10,000 (pendingCapped: at least that many). */
  pendingRows: number | null;
  pendingCapped: boolean;
  /** Why the waiting rows could not be read; null when they were. */
  pendingError: string | null;
}

/** The routed topics' partition counts against their record (src/topics/partition-record.ts). */
export interface TopicPartitionsData {
  /** False when the database has no record table (provisioned before migration 014): only the creation default is compared. */
  recorded: boolean;
  /** The deployed connector's topic.creation.default.partitions; null when not deployed or the broker's default (-1). */
  creationDefault: number | null;
  topics: Array<{ topic: string; partitions: number; recorded: number | null }>;
  /** Topics whose count differs from their record (or, unrecorded, from the creation default): a warning each. */
  changes: PartitionChange[];
}

export interface WatchdogData {
  url: string;
  running: boolean;
  /** HTTP status of GET /healthz, when it answered. */
  httpStatus: number | null;
  /** Its /healthz body: parsed JSON, or the text (shortened). */
  health: unknown;
  /** Names of alerts the body reports in state "firing" (found generically, whatever the shape). */
  firing: string[];
}

export interface StatusReport {
  generatedAt: string;
  verdict: Verdict;
  targets: { database: string; kafka: string[]; connect: string; watchdog: string };
  options: {
    timeoutMs: number;
    /** How many parked keys are listed at most. */
    parkedLimit: number;
    lagWarn: number;
    /** Parked keys are a warning when there are more than this many (--parked-warn-keys; 0: any). */
    parkedWarnKeys: number;
    /** …or when the oldest was parked longer ago than this (--parked-warn-age-ms); null: no age rule. */
    parkedWarnAgeMs: number | null;
    groups: string[];
    /** Whether --group named the groups (a missing named group is a warning) or the default was used. */
    groupsGiven: boolean;
    /** The outbox's oldest waiting row older than this is a warning (--outbox-warn-age-ms). */
    outboxWarnAgeMs: number;
    /** The outbox table larger than this is a warning (--outbox-warn-bytes). */
    outboxWarnBytes: number;
    /** More waiting rows than this is a warning (--outbox-warn-pending); null: no such rule. */
    outboxWarnPending: number | null;
  };
  stack: Section<StackData>;
  connector: Section<ConnectorData>;
  slots: Section<SlotsData>;
  consumerGroups: Section<GroupsData>;
  dlq: Section<DlqData>;
  parked: Section<ParkedData>;
  outboxTable: Section<OutboxTableData>;
  topicPartitions: Section<TopicPartitionsData>;
  watchdog: Section<WatchdogData>;
}

export type SectionName = 'stack' | 'connector' | 'slots' | 'consumerGroups' | 'dlq' | 'parked' | 'outboxTable' | 'topicPartitions' | 'watchdog';
export const SECTION_NAMES: readonly SectionName[] = ['stack', 'connector', 'slots', 'consumerGroups', 'dlq', 'parked', 'outboxTable', 'topicPartitions', 'watchdog'];
