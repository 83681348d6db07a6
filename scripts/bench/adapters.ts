#!/usr/bin/env node
/**
 * The writer ratio per ORM and driver adapter (docs/adapters.md, "Writer ratio"): for each library, one
 * connection writing transactions back to back for `--seconds` of each mode, in alternating slices: the
 * business row alone, and the business row and one outbox event (JSON) in the same transaction of that
 * library. The ratio is the second rate over the first: what the outbox costs on that library's own business path. Run on the
 * local stack's PostgreSQL (a throw-away database), after `npm run build`:
 *
 *   node build/scripts/bench/adapters.js [--seconds 5] [--only Kysely,Knex]
 */
import { randomUUID } from 'node:crypto';
import { Command, Option } from 'commander';
import { clientConfig } from 'outbox-router/db';
import { createCodec, JSON_CONTENT_TYPE } from 'outbox-router/codec';
import { createOutboxWriter } from 'outbox-router/producer';
import type { EventMap } from '../../examples/outbox-events';
import { ADAPTER_CASES, ORDERS_TABLE_DDL, type AdapterSession, type OrderEvent } from './adapter-cases';
import { createBenchDatabase } from './bench-db';

interface Row {
  adapter: string;
  library: string;
  businessTps: number;
  withOutboxTps: number;
  ratio: number;
}

/**
 * Transactions per second of `a` and of `b`, each run back to back in alternating half-second slices
 * for `seconds` in all (after a warm-up of each): a machine whose load drifts during the run (other
 * processes share it) weighs on both modes alike.
 */
async function paired(seconds: number, a: () => Promise<unknown>, b: () => Promise<unknown>): Promise<[number, number]> {
  for (const write of [a, b]) for (const until = Date.now() + 1000; Date.now() < until; ) await write();
  const done = [0, 0];
  const nanos = [0n, 0n];
  for (let slice = 0; slice < seconds * 4; slice++) {
    const i = slice % 2;
    const write = i === 0 ? a : b;
    const started = process.hrtime.bigint();
    for (const until = Date.now() + 500; Date.now() < until; done[i]++) await write();
    nanos[i] += process.hrtime.bigint() - started;
  }
  return [0, 1].map((i) => (done[i] as number) / (Number(nanos[i]) / 1e9)) as [number, number];
}

async function run(options: { seconds: number; only?: string[] }): Promise<Row[]> {
  const bench = await createBenchDatabase();
  const rows: Row[] = [];
  try {
    await bench.pool.query(ORDERS_TABLE_DDL);
    const writer = createOutboxWriter<EventMap>({ outbox: bench.config.outbox, codec: createCodec({ registry: bench.config.registry }), contentType: JSON_CONTENT_TYPE });
    const event = (orderId: string): OrderEvent => ({ aggregateType: 'order', aggregateId: orderId, type: 'OrderCancelled', payload: { orderId, reason: 'bench', cancelledAt: new Date() } });
    for (const adapter of ADAPTER_CASES.filter((c) => !options.only || options.only.includes(c.name))) {
      let session: AdapterSession | undefined;
      try {
        session = await adapter.open(clientConfig(bench.config.database), writer);
        const s = session;
        const [businessTps, withOutboxTps] = await paired(
          options.seconds,
          () => s.writeInTransaction(randomUUID(), []),
          () => {
            const id = randomUUID();
            return s.writeInTransaction(id, [event(id)]);
          },
        );
        const row = { adapter: adapter.name, library: adapter.library, businessTps, withOutboxTps, ratio: withOutboxTps / businessTps };
        rows.push(row);
        process.stderr.write(`${row.adapter}: ${row.businessTps.toFixed(0)} → ${row.withOutboxTps.toFixed(0)} tx/s, ratio ${row.ratio.toFixed(2)}\n`);
      } finally {
        await session?.close();
      }
    }
  } finally {
    await bench.drop();
  }
  return rows;
}

function table(rows: Row[]): string {
  const lines = ['| library | version | business row alone (tx/s) | with the outbox event (tx/s) | writer ratio |', '|---|---|---|---|---|'];
  for (const r of rows) lines.push(`| ${r.adapter} | ${r.library} | ${r.businessTps.toFixed(0)} | ${r.withOutboxTps.toFixed(0)} | ${r.ratio.toFixed(2)} |`);
  return lines.join('\n');
}

if (require.main === module) {
  const program = new Command('bench-adapters')
    .description('Measure the writer ratio (business tx/s with the outbox event ÷ without) through each ORM and driver adapter, on the local stack\'s PostgreSQL.')
    .addOption(new Option('--seconds <n>', 'measured seconds per library and mode').default(5).argParser(Number))
    .addOption(new Option('--only <names>', `comma-separated adapters: ${ADAPTER_CASES.map((c) => c.name).join(', ')}`).argParser((v) => v.split(',').map((s) => s.trim())))
    .option('--json', 'print the rows as JSON instead of a Markdown table')
    .action(async (opts: { seconds: number; only?: string[]; json?: boolean }) => {
      if (!Number.isFinite(opts.seconds) || opts.seconds <= 0) throw new Error(`--seconds must be a positive number, got ${opts.seconds}.`);
      const rows = await run(opts);
      process.stdout.write(`${opts.json ? JSON.stringify(rows, null, 2) : table(rows)}\n`);
    });
  program.parseAsync(process.argv).catch((error: unknown) => {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exitCode = 1;
  });
}
