import type { Pool, PoolClient } from 'pg';

/**
 * Keys of one aggregate type with dead-lettered events, for one consumer (the `<inbox>_parked` table).
 * Loaded once per batch for the batch's keys; a partition belongs to one router at a time, so the copy
 * in memory stays exact while the batch runs. While a key has rows, its later events are dead-lettered
 * too (KEY_PARKED); a replayed event that is the key's earliest row is applied and its row deleted in
 * its inbox transaction. DESIGN: per-key order is never broken silently.
 */
export class ParkedKeys {
  private constructor(
    private readonly pool: Pool,
    private readonly table: string,
    private readonly consumer: string,
    private readonly aggregateType: string,
    private readonly byKey: Map<string, string[]>,
  ) {}

  static async load(pool: Pool, table: string, consumer: string, aggregateType: string, keys: readonly string[]): Promise<ParkedKeys> {
    const byKey = new Map<string, string[]>();
    const distinct = [...new Set(keys.filter((k) => k !== ''))];
    if (distinct.length > 0) {
      const { rows } = await pool.query<{ aggregate_id: string; event_id: string }>(
        `SELECT aggregate_id, event_id FROM ${table} WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = ANY($3::text[]) ORDER BY seq`,
        [consumer, aggregateType, distinct],
      );
      for (const row of rows) byKey.set(row.aggregate_id, [...(byKey.get(row.aggregate_id) ?? []), row.event_id]);
    }
    return new ParkedKeys(pool, table, consumer, aggregateType, byKey);
  }

  /** The key's earliest dead-lettered event, or undefined when the key flows. */
  earliest(key: string): string | undefined {
    return this.byKey.get(key)?.[0];
  }

  /** Records a dead-lettered event of `key` (kept if it is already there: a replay that failed again). */
  async park(key: string, eventId: string, errorCode: string): Promise<void> {
    if (key === '') return;
    await this.pool.query(
      `INSERT INTO ${this.table} (consumer, aggregate_type, aggregate_id, event_id, error_code) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
      [this.consumer, this.aggregateType, key, eventId, errorCode],
    );
    const ids = this.byKey.get(key) ?? [];
    if (!ids.includes(eventId)) this.byKey.set(key, [...ids, eventId]);
  }

  /** Deletes the row inside the replayed event's inbox transaction. */
  async releaseIn(tx: PoolClient, key: string, eventId: string): Promise<void> {
    await tx.query(`DELETE FROM ${this.table} WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 AND event_id = $4`, [
      this.consumer,
      this.aggregateType,
      key,
      eventId,
    ]);
  }

  /** After that transaction committed. */
  released(key: string, eventId: string): void {
    const ids = (this.byKey.get(key) ?? []).filter((id) => id !== eventId);
    if (ids.length === 0) this.byKey.delete(key);
    else this.byKey.set(key, ids);
  }
}

/** `outbox dlq:release`: gives up on a key's dead letters (they stay in the DLQ) so its events flow again. */
export async function releaseKeys(pool: Pool, table: string, consumer: string, aggregateType: string, key?: string): Promise<number> {
  const result = await pool.query(
    `DELETE FROM ${table} WHERE consumer = $1 AND aggregate_type = $2 AND ($3::text IS NULL OR aggregate_id = $3)`,
    [consumer, aggregateType, key ?? null],
  );
  return result.rowCount ?? 0;
}
