import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { escapeIdentifier, escapeLiteral } from 'pg';
import type { OutboxConfig } from '../config';
import { qualified } from '../db';
import { OutboxError } from '../errors';
import { PACKAGE_ROOT as PROJECT_ROOT } from '../assets';
import { renderTemplate } from '../assets';

export const SQL_DIR = join(PROJECT_ROOT, 'sql');

export interface Migration {
  id: number;
  name: string;
  /**
   * Of the template's statements, not the rendered SQL (renaming a table is not a changed migration) and
   * not its comments (correcting a comment is not either).
   */
  checksum: string;
  /** Checksums this migration was recorded with by earlier versions; provisioning upgrades them. */
  formerChecksums: string[];
  template: string;
}

const hash = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

/** The template without its comment lines and trailing blanks: what the checksum covers. */
export function statementsOf(template: string): string {
  return template
    .split(/\r?\n/)
    .filter((line) => !/^\s*--/.test(line))
    .map((line) => line.trimEnd())
    .filter((line) => line !== '')
    .join('\n');
}

/**
 * Up to 0.1.0 the checksum covered the whole file, comments included (the current file's own
 * whole-text hash is accepted too). These are the whole-text checksums of files whose comments changed
 * since, so a database provisioned then is not refused as edited.
 */
const FORMER_CHECKSUMS: Readonly<Record<number, readonly string[]>> = {
  1: ['d929ddbda140d8c2'],
  2: ['90e52d95750dca25'],
};

const SHIPPED_MIGRATIONS = join(SQL_DIR, 'migrations');

export function loadMigrations(dir = SHIPPED_MIGRATIONS): Migration[] {
  const formerOf = (id: number) => (dir === SHIPPED_MIGRATIONS ? (FORMER_CHECKSUMS[id] ?? []) : []);
  const migrations = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((file) => {
      const match = /^(\d+)_([a-z0-9_]+)\.sql$/.exec(file);
      if (!match) throw new OutboxError('MIGRATION_FILES_INVALID', `Migration file ${join(dir, file)} must be named NNN_name.sql.`);
      const template = readFileSync(join(dir, file), 'utf8');
      const id = Number(match[1]);
      const former = [hash(template), ...formerOf(id)];
      return { id, name: match[2] as string, template, checksum: hash(statementsOf(template)), formerChecksums: [...new Set(former)] };
    });
  migrations.forEach((m, i) => {
    if (m.id !== i + 1) throw new OutboxError('MIGRATION_FILES_INVALID', `Migrations in ${dir} must be numbered 1, 2, 3… without gaps; found ${m.id} at position ${i + 1}.`);
  });
  return migrations;
}

/**
 * `base` + `suffix` within 63 bytes of UTF-8 (PostgreSQL's name limit): `base` shortened on a character
 * boundary, the suffix kept. The migrations name their objects with it; code that finds them again must too.
 */
export function derivedName(base: string, suffix: string): string {
  let head = base;
  while (Buffer.byteLength(head + suffix) > 63) head = Array.from(head).slice(0, -1).join('');
  return `${head}${suffix}`;
}

/**
 * The name PostgreSQL gives an object it names itself (makeObjectName in its indexcmds.c): `name1_name2_label`,
 * the longer of the two names shortened first (on a character boundary) to fit 63 bytes. Used to refer
 * to the sequence of a serial column and to 001's unnamed CHECK, both created before they had names of ours.
 */
export function pgObjectName(name1: string, name2: string, label: string): string {
  const avail = 63 - (label.length + 2);
  let n1 = Buffer.byteLength(name1);
  let n2 = Buffer.byteLength(name2);
  while (n1 + n2 > avail) {
    if (n1 > n2) n1--;
    else n2--;
  }
  return `${clipBytes(name1, n1)}_${clipBytes(name2, n2)}_${label}`;
}

/** The longest prefix of whole characters of at most `bytes` UTF-8 bytes. */
function clipBytes(text: string, bytes: number): string {
  let out = '';
  for (const ch of text) {
    if (Buffer.byteLength(out + ch) > bytes) break;
    out += ch;
  }
  return out;
}

/** The CDC cleanup function of migration 011, escaped and schema-qualified: `outbox` → `"public"."outbox_cleanup"`. */
export function outboxCleanupFunctionName(outbox: { schema: string; table: string }): string {
  return qualified(outbox.schema, derivedName(outbox.table, '_cleanup'));
}

/** The one-off for rows below a slot's floor (migration 012), escaped and schema-qualified. */
export function outboxCleanupBelowFloorFunctionName(outbox: { schema: string; table: string }): string {
  return qualified(outbox.schema, derivedName(outbox.table, '_cleanup_below_floor'));
}

/** The partitioned outbox's maintenance function (migration 015): partitions ahead, and drops behind the slot. */
export function outboxPartitionsFunctionName(outbox: { schema: string; table: string }): string {
  return qualified(outbox.schema, derivedName(outbox.table, '_partitions'));
}

/** The slots the CDC cleanup accepts as proof (migration 012): connector:deploy registers its slot here. */
export function outboxCleanupRegistrations(outbox: { schema: string; table: string }): string {
  return qualified(outbox.schema, derivedName(outbox.table, '_cleanup_registrations'));
}

/** The routed topics' recorded partition counts (migration 014): connector:deploy and topics:grow write them. */
export function topicPartitionsTable(outbox: { schema: string; table: string }): string {
  return qualified(outbox.schema, derivedName(outbox.table, '_topic_partitions'));
}

/** The CDC cleanup's bookkeeping tables of migration 011 (marks, and per slot its floor), escaped and schema-qualified. */
export function outboxCleanupTables(outbox: { schema: string; table: string }): { marks: string; slots: string } {
  return { marks: qualified(outbox.schema, derivedName(outbox.table, '_cleanup_marks')), slots: qualified(outbox.schema, derivedName(outbox.table, '_cleanup_slots')) };
}

/** The router's dead-lettered keys live next to the inbox: `inbox` → `inbox_parked`. */
export function parkedTableName(inboxTable: string): string {
  return derivedName(inboxTable, '_parked');
}

/**
 * The partitioned inbox's objects (migration 016, docs/inbox-partitions.md), schema-qualified and escaped:
 * the key function, the SECURITY DEFINER functions that add and drop a time partition, and the catch-all
 * partition (the table before conversion, renamed). `catchAllName` unescaped, for catalog lookups.
 */
export function inboxPartitionNames(outbox: { schema: string; inboxTable: string }): { messageMs: string; add: string; drop: string; catchAll: string; catchAllName: string; keyCheck: string } {
  const catchAllName = derivedName(outbox.inboxTable, '_other');
  return {
    messageMs: qualified(outbox.schema, derivedName(outbox.inboxTable, '_message_ms')),
    add: qualified(outbox.schema, derivedName(outbox.inboxTable, '_partition_add')),
    drop: qualified(outbox.schema, derivedName(outbox.inboxTable, '_partition_drop')),
    catchAll: qualified(outbox.schema, catchAllName),
    catchAllName,
    keyCheck: escapeIdentifier(derivedName(outbox.inboxTable, '_message_ms_check')),
  };
}

/** Every placeholder the SQL files may use, as escaped identifiers. */
export function sqlValues(config: OutboxConfig): Record<string, string> {
  const { outbox, roles, database } = config;
  return {
    schema: escapeIdentifier(outbox.schema),
    outbox: qualified(outbox.schema, outbox.table),
    outboxUnpublishedIndex: escapeIdentifier(derivedName(outbox.table, '_unpublished_idx')),
    outboxPublishedIndex: escapeIdentifier(derivedName(outbox.table, '_published_idx')),
    outboxCleanupMarks: outboxCleanupTables(outbox).marks,
    outboxCleanupSlots: outboxCleanupTables(outbox).slots,
    outboxCleanupFunction: outboxCleanupFunctionName(outbox),
    outboxCleanupBelowFloorFunction: outboxCleanupBelowFloorFunctionName(outbox),
    outboxCleanupRegistrations: outboxCleanupRegistrations(outbox),
    topicPartitions: topicPartitionsTable(outbox),
    outboxPartitionsFunction: outboxPartitionsFunctionName(outbox),
    outboxTxIdIndex: escapeIdentifier(derivedName(outbox.table, '_tx_id_idx')),
    inbox: qualified(outbox.schema, outbox.inboxTable),
    parked: qualified(outbox.schema, parkedTableName(outbox.inboxTable)),
    inboxProcessedIndex: escapeIdentifier(derivedName(outbox.inboxTable, '_processed_idx')),
    inboxLiteral: escapeLiteral(qualified(outbox.schema, outbox.inboxTable)),
    parkedLiteral: escapeLiteral(qualified(outbox.schema, parkedTableName(outbox.inboxTable))),
    inboxMessageMs: inboxPartitionNames(outbox).messageMs,
    inboxPartitionAdd: inboxPartitionNames(outbox).add,
    inboxPartitionDrop: inboxPartitionNames(outbox).drop,
    inboxKeyCheck: inboxPartitionNames(outbox).keyCheck,
    parkedSequence: qualified(outbox.schema, pgObjectName(parkedTableName(outbox.inboxTable), 'seq', 'seq')),
    outboxAggregateTypeCheck: escapeIdentifier(pgObjectName(outbox.table, 'aggregate_type', 'check')),
    heartbeat: qualified(outbox.schema, outbox.heartbeatTable),
    migrations: qualified(outbox.schema, outbox.migrationsTable),
    publication: escapeIdentifier(outbox.publication),
    database: escapeIdentifier(database.database),
    cdcRole: escapeIdentifier(roles.cdc),
    appRole: escapeIdentifier(roles.app),
    monitorRole: escapeIdentifier(roles.monitor),
    routerRole: escapeIdentifier(roles.router),
    relayRole: escapeIdentifier(roles.relay),
  };
}

export function renderSql(template: string, config: OutboxConfig, source: string): string {
  const values = sqlValues(config);
  // Escaping protects double-quoted names, not a dollar-quoted function body: a name holding the body's
  // tag would end it early. Names with `$` are legal but rare; refuse the one that would break out.
  for (const [, tag, body] of template.matchAll(/(\$[a-z_]*\$)([\s\S]*?)\1/g)) {
    for (const [, key] of body!.matchAll(/\$\{(\w+)\}/g)) {
      const value = values[key!];
      if (value?.includes(tag!)) throw new OutboxError('CONFIG_INVALID', `The name ${value} contains ${tag}, which would end the function body in ${source}. Choose a name without "${tag}".`);
    }
  }
  return renderTemplate(template, values, source);
}

export function rolesSql(config: OutboxConfig): string {
  return renderSql(readFileSync(join(SQL_DIR, 'roles.sql'), 'utf8'), config, 'sql/roles.sql');
}
