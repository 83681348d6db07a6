/**
 * The SQL the capacity bench (capacity.ts) fills its tables with, and the router's inbox INSERT it
 * measures. Pure text builders, no database: unit-tested in test/unit/bench/capacity-sql.test.ts.
 *
 * Rows are made in the database by INSERT … SELECT over generate_series, one chunk [lo, hi) of row
 * numbers per statement. Row g of n gets the time `startMs + floor(g * spanMs / n)`: rows in id order
 * are in time order, spread evenly over the span, as a steady stream of events would be. Its id is a
 * UUIDv7 of that millisecond (48 bits of time, version 7, variant 10, the rest from md5 of g and a salt),
 * so a time partition holds the rows of its window and migration 016's key function finds the same
 * millisecond in the id.
 */

/** A SQL expression: the millisecond of row `g` (a bigint expression) of `n` over [startMs, startMs + spanMs). */
export function rowMsSql(g: string, startMs: number, spanMs: number, n: number): string {
  return `(${Math.trunc(startMs)}::bigint + (${g})::bigint * ${Math.trunc(spanMs)}::bigint / ${Math.trunc(n)}::bigint)`;
}

/**
 * A SQL expression: the UUIDv7 text of row `g` from its time as 12 hex digits (`t`) and 32 random hex
 * digits (`r`): xxxxxxxx-xxxx-7xxx-[89ab]xxx-xxxxxxxxxxxx.
 */
export function uuidv7Sql(t: string, r: string, g: string): string {
  return `(substr(${t}, 1, 8) || '-' || substr(${t}, 9, 4) || '-7' || substr(${r}, 1, 3) || '-' || substr('89ab', 1 + ((${g}) % 4)::int, 1) || substr(${r}, 4, 3) || '-' || substr(${r}, 7, 12))`;
}

/**
 * Rows [lo, hi) of the span as a FROM item `r (g, ms, id)`. OFFSET 0 keeps PostgreSQL from pulling the
 * inner query up, which would compute md5 and to_hex once per use instead of once per row.
 */
export function rowsSql(span: Span, lo: number, hi: number): string {
  const ms = rowMsSql('g', span.startMs, span.spanMs, span.rows);
  return (
    `(SELECT g, ms, ${uuidv7Sql('t', 'h', 'g')} AS id FROM (SELECT g, ms, lpad(to_hex(ms), 12, '0') AS t, md5(g::text || ${literal(span.salt)}) AS h ` +
    `FROM (SELECT g, ${ms} AS ms FROM generate_series(${Math.trunc(lo)}::bigint, ${Math.trunc(hi) - 1}::bigint) AS g) a OFFSET 0) b OFFSET 0) r`
  );
}

/** The 48-bit millisecond of a UUIDv7 text, as migration 016's key function reads it. */
export function uuidv7Ms(id: string): number {
  return parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
}

/** A UUIDv7 of `ms` (random bits from `random`), lower case, as the toolkit's writer makes them. */
export function uuidv7(ms: number, random: () => number = Math.random): string {
  const hex = (digits: number) => Array.from({ length: digits }, () => Math.floor(random() * 16).toString(16)).join('');
  const t = Math.trunc(ms).toString(16).padStart(12, '0');
  return `${t.slice(0, 8)}-${t.slice(8, 12)}-7${hex(3)}-${'89ab'[Math.floor(random() * 4)]}${hex(3)}-${hex(12)}`;
}

export interface Span {
  startMs: number;
  spanMs: number;
  rows: number;
  salt: string;
}

/**
 * One chunk of inbox rows [lo, hi): one consumer, processed_at the id's time (the router applies an
 * event when it arrives), message_ms the id's millisecond in a partitioned inbox (migration 016's CHECK
 * holds: every id is a UUIDv7 at or after the conversion's cutover), its default 0 in one table.
 */
export function inboxChunkSql(inbox: string, consumer: string, span: Span, lo: number, hi: number, partitioned: boolean): string {
  return (
    `INSERT INTO ${inbox} (consumer, message_id, processed_at${partitioned ? ', message_ms' : ''}) ` +
    `SELECT ${literal(consumer)}, id, to_timestamp(ms / 1000.0)${partitioned ? ', ms' : ''} FROM ${rowsSql(span, lo, hi)}`
  );
}

/**
 * One chunk of outbox rows [lo, hi): an order event of about 150 bytes of JSON, a traceparent on every
 * other row; created_at, tx_id, seq and attempts by their defaults (the loading transaction's now() and
 * id, as a writer's transaction would stamp them).
 */
export function outboxChunkSql(outbox: string, span: Span, lo: number, hi: number): string {
  const payload =
    `'{"orderId":"order-' || (g % 1000000) || '","customerId":"c-' || (g % 50000) || '","total":' || (g % 10000) || '.50,` +
    `"currency":"EUR","lines":[{"sku":"sku-' || (g % 997) || '","qty":' || (1 + g % 5) || '}]}'`;
  // The trace and span ids from the id's hex digits: no more random bits per row (the load's CPU is the bench's limit).
  const trace = `CASE WHEN g % 2 = 0 THEN '00-' || replace(id, '-', '') || '-' || substr(replace(id, '-', ''), 17, 16) || '-01' END`;
  return (
    `INSERT INTO ${outbox} (id, aggregate_type, aggregate_id, event_type, payload, content_type, traceparent) ` +
    `SELECT id::uuid, 'Order', 'order-' || (g % 1000000), 'OrderCreated', convert_to(${payload}, 'UTF8'), 'application/json', ${trace} FROM ${rowsSql(span, lo, hi)}`
  );
}

/**
 * The router's inbox INSERT, word for word (src/router/inbox-transaction.ts beginAndInsert, the path
 * for UUID ids: one simple query, ids inlined), with its BEGIN; the caller runs the handler's part (none
 * here) and COMMIT.
 */
export function routerInboxInsertSql(inbox: string, consumerLiteral: string, keyFn: string | null, ids: readonly string[]): string {
  const idsSql = `'{${ids.join(',')}}'::uuid[]`;
  return (
    `BEGIN; INSERT INTO ${inbox} (consumer, message_id, processed_at${keyFn ? ', message_ms' : ''}) SELECT ${consumerLiteral}, id, now()${keyFn ? `, ${keyFn}(id::text)` : ''} ` +
    `FROM unnest(${idsSql}) AS t(id) ON CONFLICT DO NOTHING RETURNING message_id::text, txid_current()::text AS txid`
  );
}

/**
 * The past windows of a partitioned outbox, named and bounded as migration 015's function names and
 * bounds the windows it makes ahead (`<table>_pYYYYMMDD_HH24MISS`, the smallest uuid of each bound's
 * millisecond). The function only makes windows from now on; an outbox holding days of backlog had
 * them made by the runs of those days, so the bench makes them itself.
 */
export function outboxWindowSql(schema: string, table: string, loMs: number, widthMs: number): string {
  const name = `${table.slice(0, 46)}_p${new Date(loMs).toISOString().replace(/[-:]/g, '').replace('T', '_').slice(0, 15)}`;
  const bound = (ms: number) => {
    const h = ms.toString(16).padStart(12, '0');
    return `'${h.slice(0, 8)}-${h.slice(8, 12)}-0000-0000-000000000000'`;
  };
  return `CREATE TABLE IF NOT EXISTS ${ident(schema)}.${ident(name)} PARTITION OF ${ident(schema)}.${ident(table)} FOR VALUES FROM (${bound(loMs)}) TO (${bound(loMs + widthMs)})`;
}

/** Chunks [lo, hi) of `rows`, `size` each (the last shorter). */
export function chunks(rows: number, size: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let lo = 0; lo < rows; lo += size) out.push([lo, Math.min(rows, lo + size)]);
  return out;
}

function literal(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

function ident(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
