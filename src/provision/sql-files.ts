import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { escapeIdentifier } from 'pg';
import type { OutboxConfig } from '../config';
import { qualified } from '../db';
import { OutboxError } from '../errors';
import { PROJECT_ROOT } from '../stack/paths';
import { renderTemplate } from '../stack/template';

export const SQL_DIR = join(PROJECT_ROOT, 'sql');

export interface Migration {
  id: number;
  name: string;
  /** Of the template, not the rendered SQL: renaming a table is not a changed migration. */
  checksum: string;
  template: string;
}

export function loadMigrations(dir = join(SQL_DIR, 'migrations')): Migration[] {
  const migrations = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((file) => {
      const match = /^(\d+)_([a-z0-9_]+)\.sql$/.exec(file);
      if (!match) throw new OutboxError('CONFIG_INVALID', `Migration file ${join(dir, file)} must be named NNN_name.sql.`);
      const template = readFileSync(join(dir, file), 'utf8');
      return { id: Number(match[1]), name: match[2] as string, template, checksum: createHash('sha256').update(template).digest('hex').slice(0, 16) };
    });
  migrations.forEach((m, i) => {
    if (m.id !== i + 1) throw new OutboxError('CONFIG_INVALID', `Migrations in ${dir} must be numbered 1, 2, 3… without gaps; found ${m.id} at position ${i + 1}.`);
  });
  return migrations;
}

/** Truncated to PostgreSQL's 63-byte identifier limit, so derived names stay deterministic. */
function derivedName(base: string, suffix: string): string {
  let head = base;
  while (Buffer.byteLength(head + suffix) > 63) head = Array.from(head).slice(0, -1).join('');
  return `${head}${suffix}`;
}

/** The router's dead-lettered keys live next to the inbox: `inbox` → `inbox_parked`. */
export function parkedTableName(inboxTable: string): string {
  return derivedName(inboxTable, '_parked');
}

/** Every placeholder the SQL files may use, as escaped identifiers. */
export function sqlValues(config: OutboxConfig): Record<string, string> {
  const { outbox, roles, database } = config;
  return {
    schema: escapeIdentifier(outbox.schema),
    outbox: qualified(outbox.schema, outbox.table),
    outboxUnpublishedIndex: escapeIdentifier(derivedName(outbox.table, '_unpublished_idx')),
    outboxPublishedIndex: escapeIdentifier(derivedName(outbox.table, '_published_idx')),
    inbox: qualified(outbox.schema, outbox.inboxTable),
    parked: qualified(outbox.schema, parkedTableName(outbox.inboxTable)),
    heartbeat: qualified(outbox.schema, outbox.heartbeatTable),
    migrations: qualified(outbox.schema, outbox.migrationsTable),
    publication: escapeIdentifier(outbox.publication),
    database: escapeIdentifier(database.database),
    cdcRole: escapeIdentifier(roles.cdc),
    appRole: escapeIdentifier(roles.app),
    monitorRole: escapeIdentifier(roles.monitor),
  };
}

export function renderSql(template: string, config: OutboxConfig, source: string): string {
  return renderTemplate(template, sqlValues(config), source);
}

export function rolesSql(config: OutboxConfig): string {
  return renderSql(readFileSync(join(SQL_DIR, 'roles.sql'), 'utf8'), config, 'sql/roles.sql');
}
