/**
 * The bench's handlers module, loaded by the real router CLI (`outbox router --handlers
 * build/scripts/bench/children/handlers.js`). Each handled event gets one effect row in bench_handled, written
 * in the router's inbox transaction, with `clock_timestamp()` as handled_at: the database clock, the
 * same one that stamped writtenAt at insert. The record's Kafka timestamp (broker LogAppendTime on the
 * bench topics) goes in kafka_at, so commit → Kafka | Kafka → handled is split on real timestamps.
 *
 * Per-event handlers by default; with BENCH_HANDLER=batch, the batch form `{ batch(events, ctx) }`
 * (one INSERT … SELECT FROM unnest for the chunk's fresh events), for a router that supports it.
 */
interface BenchEvent {
  id: string;
  payload: unknown;
  createdAt?: Date;
}
interface Tx {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

const COLUMNS = 'INSERT INTO bench_handled (id, step, written_at, kafka_at, handled_at)';

function fields(event: BenchEvent): [string, string | null, string | null, Date | null] {
  const p = (event.payload ?? {}) as { step?: unknown; writtenAt?: unknown };
  return [event.id, typeof p.step === 'string' ? p.step : null, typeof p.writtenAt === 'string' ? p.writtenAt : null, event.createdAt ?? null];
}

async function perEvent(event: BenchEvent, ctx: { tx: Tx }): Promise<void> {
  await ctx.tx.query(`${COLUMNS} VALUES ($1, $2, $3, $4, clock_timestamp()) ON CONFLICT (id) DO NOTHING`, fields(event));
}

async function batch(events: ReadonlyArray<BenchEvent>, ctx: { tx: Tx }): Promise<void> {
  const rows = events.map(fields);
  await ctx.tx.query(
    `${COLUMNS} SELECT u.id, u.step, u.w, u.k, clock_timestamp() FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS u(id, step, w, k) ON CONFLICT (id) DO NOTHING`,
    [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2]), rows.map((r) => r[3])],
  );
}

const handler = process.env.BENCH_HANDLER === 'batch' ? { batch } : perEvent;

/** The DDL of the effect table; the bench creates it before the router starts. */
export const BENCH_TABLES_DDL = [
  'CREATE TABLE IF NOT EXISTS bench_handled (id uuid PRIMARY KEY, step text, written_at timestamptz, kafka_at timestamptz, handled_at timestamptz NOT NULL)',
  'CREATE INDEX IF NOT EXISTS bench_handled_step ON bench_handled (step)',
  'CREATE TABLE IF NOT EXISTS bench_written (id uuid PRIMARY KEY, step text NOT NULL, written_at timestamptz NOT NULL)',
];

export default { order: { OrderCreated: handler, OrderCancelled: handler } };
