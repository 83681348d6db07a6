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

/** What ensureOutboxLimits did inside provisioning's transaction, and what is left to validate after it. */
export interface LimitsPlan {
  changed: string[];
  /** NOT VALID constraints: added by this run, or left NOT VALID by an earlier one. */
  toValidate: LimitConstraint[];
}

/**
 * Makes the outbox's limit constraints exactly `outboxLimitConstraints(config)`; runs inside provisioning's
 * transaction. A new or changed constraint is added NOT VALID (a catalog change under a moment's ACCESS
 * EXCLUSIVE lock); checking the existing rows is left to validateOutboxLimits after COMMIT.
 */
export async function ensureOutboxLimits(client: Client, config: OutboxConfig): Promise<LimitsPlan> {
  const table = qualified(config.outbox.schema, config.outbox.table);
  const wanted = outboxLimitConstraints(config);
  const { rows } = await client.query<{ name: string; validated: boolean; comment: string | null }>(
    `SELECT co.conname AS name, co.convalidated AS validated, obj_description(co.oid, 'pg_constraint') AS comment
       FROM pg_constraint co JOIN pg_class c ON c.oid = co.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2 AND co.conname = ANY($3::text[])`,
    [config.outbox.schema, config.outbox.table, wanted.map((c) => c.name)],
  );
  const plan: LimitsPlan = { changed: [], toValidate: [] };
  for (const constraint of wanted) {
    const have = rows.find((r) => r.name === constraint.name);
    const name = client.escapeIdentifier(constraint.name);
    if (have?.comment !== marker(constraint)) {
      if (have) await client.query(`ALTER TABLE ${table} DROP CONSTRAINT ${name}`);
      // NOT VALID: a legacy row that breaks the rule must not fail the whole provisioning.
      await client.query(`ALTER TABLE ${table} ADD CONSTRAINT ${name} CHECK (${constraint.check}) NOT VALID`);
      await client.query(`COMMENT ON CONSTRAINT ${name} ON ${table} IS ${escapeLiteral(marker(constraint))}`);
      plan.changed.push(constraint.name);
      plan.toValidate.push(constraint);
    } else if (!have.validated) {
      plan.toValidate.push(constraint);
    }
  }
  return plan;
}

/**
 * Checks the existing rows against the constraints ensureOutboxLimits left NOT VALID; returns the names
 * of those the rows break (they stay NOT VALID: new rows are checked, old ones are not). Runs after
 * provisioning's COMMIT, each VALIDATE its own transaction: VALIDATE CONSTRAINT holds only a SHARE
 * UPDATE EXCLUSIVE lock, so writers go on inserting while it reads the whole outbox, where inside the
 * provisioning transaction the DROP's ACCESS EXCLUSIVE lock would have stopped them for the whole scan.
 * `dryRun`: nothing was committed; the rows are read (SELECT, no lock beyond reading) against each
 * check instead.
 */
export async function validateOutboxLimits(client: Client, config: OutboxConfig, constraints: readonly LimitConstraint[], dryRun = false): Promise<string[]> {
  const table = qualified(config.outbox.schema, config.outbox.table);
  const broken: string[] = [];
  if (constraints.length === 0) return broken;
  // A dry run on a new database: the rolled-back transaction made the outbox, and no rows can break anything.
  if (dryRun && (await client.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [table])).rows[0]?.t == null) return broken;
  // Reading a large outbox outlasts database.statementTimeoutMs (30 s by default); nothing waits on it.
  await client.query('SET statement_timeout = 0');
  try {
    for (const constraint of constraints) if (await breaks(client, table, constraint, dryRun)) broken.push(constraint.name);
  } finally {
    await client.query('RESET statement_timeout');
  }
  return broken;
}

async function breaks(client: Client, table: string, constraint: LimitConstraint, dryRun: boolean): Promise<boolean> {
  if (dryRun) {
    const { rows } = await client.query<{ broken: boolean }>(`SELECT EXISTS (SELECT 1 FROM ${table} WHERE NOT (${constraint.check})) AS broken`);
    return rows[0]?.broken === true;
  }
  try {
    await client.query(`ALTER TABLE ${table} VALIDATE CONSTRAINT ${client.escapeIdentifier(constraint.name)}`);
    return false;
  } catch (error) {
    if (pgCode(error) !== '23514') throw error;
    return true;
  }
}
