import { escapeLiteral, type Pool, type PoolClient } from 'pg';
import { OutboxError } from '../errors';
import { statementName, type ClosingGuard } from './closing-check';

/**
 * Keys the table can hold: not empty (a keyless record has no order to keep) and without NUL, which
 * PostgreSQL text cannot store (a record produced straight to Kafka may carry one): such a key is
 * never parked, rather than failing every batch that holds it.
 */
function parkable(key: string): boolean {
  return key !== '' && !key.includes('\0');
}

/**
 * A text[] as one SQL literal (for a simple query, which takes no parameters): each element quoted in the
 * array syntax (backslash and double quote escaped), the whole escaped as a string literal. Keys never hold
 * NUL (see parkable).
 */
export function textArrayLiteral(values: readonly string[]): string {
  return escapeLiteral(`{${values.map((v) => `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join(',')}}`);
}

/** A key's earliest parked event: the one a replay must apply before anything else of the key. */
interface Head {
  eventId: string;
  seq: string;
}

/**
 * Another router parked a key of this batch after the batch loaded its heads (the partition moved, or
 * a stale owner was still finishing): the transaction that found it is rolled back, the key's head
 * reloaded and the record decided again.
 */
export class ParkedKeysStale extends Error {
  constructor(readonly keys: readonly string[]) {
    super(`Key(s) ${keys.map((k) => JSON.stringify(k)).join(', ')} were parked by another router after this batch loaded its parked keys.`);
    this.name = 'ParkedKeysStale';
  }
}

/**
 * Keys of one aggregate type with dead-lettered events, for one consumer (the `<inbox>_parked` table).
 * Loaded per batch, and only each key's HEAD (its earliest row, by seq) is loaded and kept: the cost of
 * a batch depends on its distinct keys, never on how many events a hot key has parked (one index probe
 * per key on (consumer, aggregate_type, aggregate_id, seq), migration 009). While a key has a head, its
 * later events are dead-lettered too (KEY_PARKED); a replayed event that is the key's head is applied
 * and its row deleted in its inbox transaction, which also reads the next head (LIMIT 1).
 *
 * A batch's copy can be stale if another router parked a key after the load (a partition moved in a
 * rebalance while the old owner was still finishing a record): `guardIn` checks, inside each inbox
 * transaction (`guard`), that no key assumed unparked has a row now. Per-key order is never broken silently.
 */
export class ParkedKeys {
  private constructor(
    private readonly pool: Pool,
    private readonly table: string,
    private readonly consumer: string,
    private readonly aggregateType: string,
    private readonly heads: Map<string, Head>,
    private readonly hints?: ParkedHints,
  ) {}

  /**
   * The heads of these keys. With `hints` that know the aggregate type has no parked row at all (the
   * common case), nothing is read: every key flows, and the closing guard of each inbox transaction still
   * finds a key parked since (by another router), so the record is decided again on its real head.
   */
  static async load(pool: Pool, table: string, consumer: string, aggregateType: string, keys: readonly string[], hints?: ParkedHints): Promise<ParkedKeys> {
    const parked = new ParkedKeys(pool, table, consumer, aggregateType, new Map(), hints);
    if (!hints?.knownEmpty(aggregateType)) await parked.reload(keys);
    return parked;
  }

  /** The SQL of the head load, for tests that check what it reads (EXPLAIN). */
  static headsQuery(table: string): string {
    return (
      `SELECT k.aggregate_id, h.event_id, h.seq::text AS seq FROM unnest($3::text[]) AS k(aggregate_id) ` +
      `CROSS JOIN LATERAL (SELECT p.event_id, p.seq FROM ${table} p WHERE p.consumer = $1 AND p.aggregate_type = $2 AND p.aggregate_id = k.aggregate_id ORDER BY p.seq LIMIT 1) h`
    );
  }

  /**
   * (Re)reads the heads of these keys; keys without rows flow. The same statement says whether the
   * aggregate type has any parked row at all (a row of NULLs when it has), for the hints.
   */
  async reload(keys: readonly string[]): Promise<void> {
    const distinct = [...new Set(keys.filter(parkable))];
    if (distinct.length === 0) return;
    const text = `${ParkedKeys.headsQuery(this.table)} UNION ALL SELECT NULL, NULL, NULL WHERE EXISTS (SELECT FROM ${this.table} WHERE consumer = $1 AND aggregate_type = $2)`;
    const { rows } = await this.pool.query<{ aggregate_id: string | null; event_id: string; seq: string }>({ name: statementName(text), text, values: [this.consumer, this.aggregateType, distinct] });
    for (const key of distinct) this.heads.delete(key);
    for (const row of rows) if (row.aggregate_id !== null) this.heads.set(row.aggregate_id, { eventId: row.event_id, seq: row.seq });
    this.hints?.set(this.aggregateType, rows.length === 0);
  }

  /** The key's earliest dead-lettered event, or undefined when the key flows. */
  earliest(key: string): string | undefined {
    return this.heads.get(key)?.eventId;
  }

  /** Records a dead-lettered event of `key` (kept if it is already there: a replay that failed again). */
  async park(key: string, eventId: string, errorCode: string): Promise<void> {
    if (!parkable(key)) return;
    await this.pool.query(
      `INSERT INTO ${this.table} (consumer, aggregate_type, aggregate_id, event_id, error_code) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
      [this.consumer, this.aggregateType, key, eventId, errorCode],
    );
    this.hints?.set(this.aggregateType, false);
    // A parked key's head does not change when an event joins its tail; a new one needs its head read
    // (it may have had rows this batch did not know about).
    if (!this.heads.has(key)) await this.reload([key]);
  }

  /**
   * For the inbox transaction's closing check: the keys of `keys` (all unparked when this batch loaded)
   * that have a parked row now; the transaction then fails with ParkedKeysStale. One indexed probe per
   * key, inside the transaction and in the statement it sends anyway before COMMIT (no round trip of
   * its own), so a park committed before it is seen. undefined when no key can be parked.
   */
  guard(keys: readonly string[]): ClosingGuard | undefined {
    const distinct = [...new Set(keys.filter(parkable))];
    if (distinct.length === 0) return undefined;
    return {
      literal: `EXISTS (SELECT FROM ${this.table} WHERE consumer = ${escapeLiteral(this.consumer)} AND aggregate_type = ${escapeLiteral(this.aggregateType)} AND aggregate_id = ANY (${textArrayLiteral(distinct)}::text[]))`,
      sql: `ARRAY(SELECT DISTINCT aggregate_id FROM ${this.table} WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = ANY($3::text[]))`,
      values: [this.consumer, this.aggregateType, distinct],
      stale: (parked) => new ParkedKeysStale(parked),
    };
  }

  /**
   * Deletes the head row inside the replayed event's inbox transaction and reads the key's next head in
   * the same statement (LIMIT 1). Returns it for `released`. `ORDER BY p.seq`, qualified: a bare `seq`
   * would name the output column `seq::text AS seq` and order the seqs as text ('10' < '9'), making a
   * later event the head, so the replayed events before it went back to the DLQ.
   */
  async releaseIn(tx: PoolClient, key: string, eventId: string): Promise<Head | undefined> {
    const { rows } = await tx.query<{ event_id: string; seq: string }>(
      `WITH gone AS (DELETE FROM ${this.table} WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 AND event_id = $4) ` +
        `SELECT p.event_id, p.seq::text AS seq FROM ${this.table} p WHERE p.consumer = $1 AND p.aggregate_type = $2 AND p.aggregate_id = $3 AND p.event_id <> $4 ORDER BY p.seq LIMIT 1`,
      [this.consumer, this.aggregateType, key, eventId],
    );
    return rows[0] ? { eventId: rows[0].event_id, seq: rows[0].seq } : undefined;
  }

  /** After that transaction committed: the next head, or the key flows again. */
  released(key: string, next: Head | undefined): void {
    if (next) this.heads.set(key, next);
    else this.heads.delete(key);
  }
}

/**
 * What one router process knows about its parked table, per aggregate type: that it has no row at all.
 * Learnt from a load that found none; forgotten when this process parks a key of the type, or a load
 * (the reload after a closing guard found a key parked by another router) finds one. It only saves the
 * load: every inbox transaction's closing guard checks its keys whatever the hint says.
 */
export class ParkedHints {
  private readonly empty = new Set<string>();

  knownEmpty(aggregateType: string): boolean {
    return this.empty.has(aggregateType);
  }

  set(aggregateType: string, empty: boolean): void {
    if (empty) this.empty.add(aggregateType);
    else this.empty.delete(aggregateType);
  }
}

export interface ReleaseTarget {
  /** One key; without it, every parked key of the aggregate type. */
  key?: string;
  /** Only this parked event (its id), so the key's next parked event becomes its head. */
  id?: string;
  /** Only the key's head (its earliest parked event); needs `key`. */
  head?: boolean;
}

/**
 * `outbox dlq:release`: gives up on parked dead letters (they stay in the DLQ). A whole key (or every
 * key) flows again; `id` or `head` skips exactly one event, and the key's next parked event becomes its
 * head. Returns the released rows.
 */
export async function releaseKeys(
  pool: Pool,
  table: string,
  consumer: string,
  aggregateType: string,
  which: ReleaseTarget | string = {},
): Promise<Array<{ aggregateId: string; eventId: string }>> {
  // A plain string is the key (the signature before one-event releases existed).
  const target: ReleaseTarget = typeof which === 'string' ? { key: which } : which;
  if (target.head && target.key === undefined) {
    throw new OutboxError('FLAG_INVALID', 'dlq:release --head needs --key <key>: the head is the earliest parked event of one key.');
  }
  if (target.head && target.id !== undefined) {
    throw new OutboxError('FLAG_INVALID', `dlq:release takes --head or --id, not both (got --id ${JSON.stringify(target.id)}).`);
  }
  const only = target.head
    ? `AND seq = (SELECT seq FROM ${table} WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 ORDER BY seq LIMIT 1)`
    : target.id !== undefined
      ? 'AND event_id IN ($4, lower($4))'
      : '';
  const { rows } = await pool.query<{ aggregate_id: string; event_id: string }>(
    `DELETE FROM ${table} WHERE consumer = $1 AND aggregate_type = $2 AND ($3::text IS NULL OR aggregate_id = $3) ${only} RETURNING aggregate_id, event_id`,
    target.id !== undefined ? [consumer, aggregateType, target.key ?? null, target.id] : [consumer, aggregateType, target.key ?? null],
  );
  return rows.map((r) => ({ aggregateId: r.aggregate_id, eventId: r.event_id }));
}

/**
 * After `dlq:release` of whole keys: those of `keys` that have parked rows again, with their head. A
 * running router whose batch loaded a key's head before the release still sees the key parked and
 * parks the key's next event behind the old head (KEY_PARKED), so the key is parked again at once.
 */
export async function parkedAgain(pool: Pool, table: string, consumer: string, aggregateType: string, keys: readonly string[]): Promise<Array<{ aggregateId: string; head: string; errorCode: string; rows: number }>> {
  if (keys.length === 0) return [];
  const { rows } = await pool.query<{ aggregate_id: string; head: string; error_code: string; n: number }>(
    `SELECT aggregate_id, (array_agg(event_id ORDER BY seq))[1] AS head, (array_agg(error_code ORDER BY seq))[1] AS error_code, count(*)::int AS n FROM ${table}
      WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = ANY($3::text[]) GROUP BY aggregate_id ORDER BY aggregate_id`,
    [consumer, aggregateType, [...new Set(keys)]],
  );
  return rows.map((r) => ({ aggregateId: r.aggregate_id, head: r.head, errorCode: r.error_code, rows: r.n }));
}
