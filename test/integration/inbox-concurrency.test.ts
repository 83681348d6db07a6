/**
 * Two routers on one inbox during a rebalance, on the real database: router A's attempt fails and rolls
 * back while router B, which now owns the partition, inserts the same event's inbox row (it waited on
 * A's row lock) and commits. A must not take B's row for one its handler committed on its own (a false
 * HANDLER_ENDED_TRANSACTION that dead-lettered the event and deleted B's row, so a replay applied it
 * twice). Found by the chaos run with two routers and failing handlers.
 *
 * The only seam: A's connection holds back the one query that looks for surviving rows until B has
 * committed, which is the interleaving the chaos run hit by chance.
 */
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { isOutboxError } from '../../src/errors';
import { provision } from '../../src/provision';
import { applyMany, HandlerFailed } from '../../src/router/inbox-transaction';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

const until = waitsUpTo(15_000);

describe('the inbox transaction with two routers on one event', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let poolA: Pool;
  let poolB: Pool;

  beforeAll(async () => {
    db = await freshDatabase('inboxrace');
    config = testConfig(db.name);
    await provision(config);
    poolA = createPool(config.database, { max: 3 });
    poolB = createPool(config.database, { max: 3 });
  });

  afterAll(async () => {
    await poolA?.end();
    await poolB?.end();
    await db?.drop();
  });

  /** Router A's pool, whose clients hold back the surviving-rows query until `release` resolves. */
  function heldBack(pool: Pool, release: Promise<void>): Pool {
    return new Proxy(pool, {
      get(target, prop, receiver) {
        if (prop !== 'connect') return Reflect.get(target, prop, receiver) as unknown;
        return async () => {
          const client = await target.connect();
          const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
          (client as { query: unknown }).query = async (...args: unknown[]) => {
            const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text ?? '';
            if (text.startsWith('SELECT message_id::text AS id FROM')) await release;
            return query(...args);
          };
          return client as PoolClient;
        };
      },
    });
  }

  it("a failed attempt does not take the other router's committed row for its own, nor delete it", async () => {
    const id = randomUUID();
    let bCommitted!: () => void;
    const bDone = new Promise<void>((resolve) => (bCommitted = resolve));
    let applyB: Promise<unknown> | undefined;
    const ranB: string[] = [];

    const attemptA = applyMany(heldBack(poolA, bDone), 'inbox', 'c', [{ id }], {
      calls: (fresh) =>
        fresh.map((item) => ({
          items: [item],
          run: async () => {
            // B takes over the partition and delivers the same event: its INSERT waits on A's row.
            applyB = applyMany(poolB, 'inbox', 'c', [{ id }], { calls: (f) => f.map((i) => ({ items: [i], run: async () => void ranB.push(i.id) })) }).finally(() => bCommitted());
            await until('B waits on the row lock', () => poolA.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"), (r) => r.rows[0].n === 1);
            throw new Error('a flaky handler');
          },
        })),
    }).then(
      () => undefined,
      (e: unknown) => e,
    );

    const errorA = await attemptA;
    await expect(applyB).resolves.toEqual(['applied']);
    expect(ranB).toEqual([id]);
    // A's failure is its handler's, as thrown: one failed attempt to retry, not a transaction it ended.
    expect(errorA).toBeInstanceOf(HandlerFailed);
    expect(isOutboxError((errorA as HandlerFailed).cause, 'HANDLER_ENDED_TRANSACTION')).toBe(false);
    expect(((errorA as HandlerFailed).cause as Error).message).toBe('a flaky handler');
    // B's inbox row stays: a redelivery or replay of the event is a duplicate.
    expect((await poolA.query('SELECT count(*)::int AS n FROM inbox WHERE consumer = $1 AND message_id = $2', ['c', id])).rows[0].n).toBe(1);
    await expect(applyMany(poolA, 'inbox', 'c', [{ id }], { calls: (f) => f.map((i) => ({ items: [i], run: async () => {} })) })).resolves.toEqual(['duplicate']);
  });
});
