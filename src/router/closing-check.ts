import { createHash } from 'node:crypto';
import type { PoolClient } from 'pg';
import { pgCode } from '../db';

/**
 * The inbox transaction's closing check (see applyMany in inbox-transaction.ts): one simple query that
 * checks the transaction is still the router's own and no key of the batch was parked since it loaded,
 * then commits; and the named statements the router's frequent texts use.
 */

/** The parked-key check folded into the transaction's closing check. */
export interface ClosingGuard {
  /** A boolean expression with its values as literals: true when a key was parked since the batch loaded. */
  literal: string;
  /** An expression yielding text[] of those keys ($1… are `values`), read when the check failed. */
  sql: string;
  values: readonly unknown[];
  /** Thrown (as InboxUnavailable's cause) when it yields keys. */
  stale(keys: readonly string[]): Error;
}

/** SQLSTATEs the closing check raises on purpose (see closingStatement): division_by_zero, invalid_text_representation. */
export const CHECK_NOT_OURS = '22012';
export const CHECK_PARKED = '22P02';

/**
 * The closing check and COMMIT as one simple query (parameters cannot go in one, so the txid and the
 * guard's values are literals). The check fails the transaction, and the server skips the COMMIT:
 * - 22012 when the transaction is not the one that inserted the inbox rows (a handler ran COMMIT or
 *   ROLLBACK, then BEGIN); an ended transaction without a new one fails the same way (no txid);
 * - 22P02 when a key of the guard was parked since the batch loaded.
 * The failing expressions are not constants, so the planner cannot fold them into an error of its own;
 * the first column is evaluated first.
 */
export function closingStatement(txid: string, guard: ClosingGuard | undefined): string {
  if (!/^\d+$/.test(txid)) throw new Error(`closingStatement: not a transaction id: ${JSON.stringify(txid)}`);
  const parked = guard ? `, (CASE WHEN ${guard.literal} THEN 'parked' ELSE '0' END)::int AS fresh` : '';
  return `SELECT 1 / (txid_current_if_assigned() IS NOT DISTINCT FROM ${txid}::bigint)::int AS ours${parked}; COMMIT`;
}

/**
 * The closing check's own failure, or undefined for any other error. An error a COMMIT raises (a deferred
 * trigger of the handler's tables) carries the trigger's context in `where`; the check's never does.
 */
export function checkFailure(error: unknown): string | undefined {
  const code = pgCode(error);
  if (code !== CHECK_NOT_OURS && code !== CHECK_PARKED) return undefined;
  return (error as { where?: string }).where ? undefined : code;
}

/** The guard's keys that are parked now (after the closing check found one): for the stale error. */
export async function parkedNow(client: PoolClient, guard: ClosingGuard): Promise<string[]> {
  const { rows } = await client.query<{ parked: string[] | null }>({ name: statementName(`SELECT ${guard.sql} AS parked`), text: `SELECT ${guard.sql} AS parked`, values: [...guard.values] });
  return rows[0]?.parked ?? [];
}

const statementNames = new Map<string, string>();
/**
 * A named prepared statement (parsed and planned once per connection) for a text the router sends
 * often. The name is derived from the text, so two texts (two inbox tables) never share one.
 */
export function statementName(text: string): string {
  let name = statementNames.get(text);
  if (!name) statementNames.set(text, (name = `outbox_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`));
  return name;
}
