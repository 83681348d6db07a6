import { escapeLiteral, type Client } from 'pg';
import type { OutboxConfig } from '../config';
import { pgCode, qualified } from '../db';
import { aggregateTypeCheckSql, MAX_AGGREGATE_ID_BYTES, MAX_HEADERS_BYTES, OUTBOX_LIMIT_CONSTRAINTS, traceparentCheckSql } from '../producer/limits';

/**
 * The writer's limits (src/producer/limits.ts) as named CHECK constraints on the outbox, so a row the
 * application inserts by plain SQL is refused at INSERT (SQLSTATE 23514, naming the constraint) instead
 * of failing the Debezium task, which can never get past it. They are kept here rather than in a
 * migration because the payload limit follows outbox.maxPayloadBytes, and because a dropped or altered
 * constraint is put back by the next `db:provision`.
 */
export interface LimitConstraint {
  name: string;
  /** The CHECK expression. */
  check: string;
}

export interface LimitsReport {
  /** Constraints added or replaced by this run. */
  changed: string[];
  /**
   * Constraints existing rows violate: they stay NOT VALID (new and updated rows are checked; old rows
   * are not) until those rows are gone and a later `db:provision` validates them.
   */
  notValidated: string[];
}

export function outboxLimitConstraints(config: OutboxConfig): LimitConstraint[] {
  const names = OUTBOX_LIMIT_CONSTRAINTS;
  return [
    { name: names.payload, check: `octet_length(payload) <= ${config.outbox.maxPayloadBytes}` },
    { name: names.headers, check: `octet_length(headers) <= ${MAX_HEADERS_BYTES}` },
    { name: names.traceparent, check: traceparentCheckSql('traceparent') },
    { name: names.aggregateId, check: `octet_length(aggregate_id) BETWEEN 1 AND ${MAX_AGGREGATE_ID_BYTES}` },
    { name: names.aggregateType, check: aggregateTypeCheckSql('aggregate_type') },
  ];
}

/**
 * Each constraint carries its expression in its comment: an unchanged one is recognised without parsing
 * pg_get_constraintdef (whose formatting varies), and left alone, since ALTER TABLE … ADD CONSTRAINT
 * takes an ACCESS EXCLUSIVE lock a re-provision of a busy outbox should not queue for.
 */
const marker = (c: LimitConstraint) => `outbox-router limit: CHECK (${c.check})`;

/** Makes the outbox's limit constraints exactly `outboxLimitConstraints(config)`; runs inside provisioning's transaction. */
export async function ensureOutboxLimits(client: Client, config: OutboxConfig): Promise<LimitsReport> {
  const table = qualified(config.outbox.schema, config.outbox.table);
  const wanted = outboxLimitConstraints(config);
  const { rows } = await client.query<{ name: string; validated: boolean; comment: string | null }>(
    `SELECT co.conname AS name, co.convalidated AS validated, obj_description(co.oid, 'pg_constraint') AS comment
       FROM pg_constraint co JOIN pg_class c ON c.oid = co.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2 AND co.conname = ANY($3::text[])`,
    [config.outbox.schema, config.outbox.table, wanted.map((c) => c.name)],
  );
  const report: LimitsReport = { changed: [], notValidated: [] };
  for (const constraint of wanted) {
    const have = rows.find((r) => r.name === constraint.name);
    const name = client.escapeIdentifier(constraint.name);
    if (have?.comment !== marker(constraint)) {
      if (have) await client.query(`ALTER TABLE ${table} DROP CONSTRAINT ${name}`);
      // NOT VALID first: a legacy row that breaks the rule must not fail the whole provisioning.
      await client.query(`ALTER TABLE ${table} ADD CONSTRAINT ${name} CHECK (${constraint.check}) NOT VALID`);
      await client.query(`COMMENT ON CONSTRAINT ${name} ON ${table} IS ${escapeLiteral(marker(constraint))}`);
      report.changed.push(constraint.name);
    } else if (have.validated) {
      continue;
    }
    await client.query('SAVEPOINT validate_limit');
    try {
      await client.query(`ALTER TABLE ${table} VALIDATE CONSTRAINT ${name}`);
      await client.query('RELEASE SAVEPOINT validate_limit');
    } catch (error) {
      await client.query('ROLLBACK TO SAVEPOINT validate_limit');
      if (pgCode(error) !== '23514') throw error;
      report.notValidated.push(constraint.name);
    }
  }
  return report;
}
