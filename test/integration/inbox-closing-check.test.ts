/**
 * The inbox transaction's closing check and COMMIT, sent as ONE simple query, on the real database: the
 * check fails the transaction (so the server skips the COMMIT behind it) when a handler ended the
 * router's transaction and began another, or when a key of the chunk was parked by another router
 * since the batch loaded; an error the COMMIT itself raises (a deferred trigger of the handler's table)
 * stays the handler's failure, even when it has the same SQLSTATE as the check's.
 */
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { isOutboxError } from '../../src/errors';
import { provision } from '../../src/provision';
import { applyMany, HandlerFailed, InboxUnavailable, type HandlerCall, type InboxItem } from '../../src/router/inbox-transaction';
import { ParkedHints, ParkedKeys, ParkedKeysStale } from '../../src/router/parked';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, type FreshDatabase } from '../support/stack-env';

const PARKED = 'inbox_parked';

describe('the closing check and COMMIT in one round trip', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;

  beforeAll(async () => {
    db = await freshDatabase('closing');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await pool.query('CREATE TABLE effects (id uuid PRIMARY KEY, note text)');
  });

  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  const calls =
    (run: (tx: PoolClient, item: InboxItem) => Promise<void>) =>
    (fresh: readonly InboxItem[]): Array<HandlerCall<InboxItem>> =>
      fresh.map((item) => ({ items: [item], run: (tx) => run(tx, item) }));
  const effect = async (tx: PoolClient, item: InboxItem) => void (await tx.query('INSERT INTO effects (id, note) VALUES ($1, $2)', [item.id, 'applied']));
  const rows = async (table: string, id: string) => (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE ${table === 'effects' ? 'id' : 'message_id'} = $1`, [id])).rows[0]?.n;
  const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e);

  it('commits the inbox row and the effect together, in two round trips of its own', async () => {
    const id = randomUUID();
    const sent: string[] = [];
    const counting = new Proxy(pool, {
      get(target, prop, receiver) {
        if (prop !== 'connect') return Reflect.get(target, prop, receiver) as unknown;
        return async () => {
          const client = await target.connect();
          // Wrapped once: the pool hands the same client out again.
          const held = client as { unwrappedQuery?: (...args: unknown[]) => Promise<unknown> };
          const query = (held.unwrappedQuery ??= client.query.bind(client) as (...args: unknown[]) => Promise<unknown>);
          (client as { query: unknown }).query = (...args: unknown[]) => {
            const text = typeof args[0] === 'string' ? args[0] : ((args[0] as { text?: string }).text ?? '');
            sent.push(text.startsWith('INSERT INTO effects') ? 'handler' : (text.split(/[ ;]/)[0] as string));
            return query(...args);
          };
          return client as PoolClient;
        };
      },
    });
    // Once per pool, not per chunk: the catalog query for the inbox's key function (migration 016).
    await applyMany(counting, 'inbox', 'c', [{ id: randomUUID() }], { calls: calls(effect) });
    expect(sent[0]).toBe('SELECT');
    sent.length = 0;
    await expect(applyMany(counting, 'inbox', 'c', [{ id }], { calls: calls(effect) })).resolves.toEqual(['applied']);
    expect(sent).toEqual(['BEGIN', 'handler', 'SELECT']);
    expect([await rows('inbox', id), await rows('effects', id)]).toEqual([1, 1]);
  });

  it('a handler that ran COMMIT and BEGIN fails the event as HANDLER_ENDED_TRANSACTION, and the inbox row its COMMIT let through goes', async () => {
    const id = randomUUID();
    const error = await failure(
      applyMany(pool, 'inbox', 'c', [{ id }], {
        calls: calls(async (tx, item) => {
          await tx.query('COMMIT');
          await tx.query('BEGIN');
          await effect(tx, item);
        }),
      }),
    );
    expect(error).toBeInstanceOf(HandlerFailed);
    expect(isOutboxError((error as HandlerFailed).cause, 'HANDLER_ENDED_TRANSACTION')).toBe(true);
    // The second transaction (the effect) was never committed; the first one's inbox row was deleted.
    expect([await rows('inbox', id), await rows('effects', id)]).toEqual([0, 0]);
  });

  it('a handler that ran ROLLBACK and BEGIN fails the same way, with nothing committed', async () => {
    const id = randomUUID();
    const error = await failure(
      applyMany(pool, 'inbox', 'c', [{ id }], {
        calls: calls(async (tx, item) => {
          await tx.query('ROLLBACK');
          await tx.query('BEGIN');
          await effect(tx, item);
        }),
      }),
    );
    expect(isOutboxError((error as HandlerFailed).cause, 'HANDLER_ENDED_TRANSACTION')).toBe(true);
    expect([await rows('inbox', id), await rows('effects', id)]).toEqual([0, 0]);
  });

  it('a key parked by another router while the handler ran: nothing commits, and the stale error names the key (quotes and backslashes too)', async () => {
    const id = randomUUID();
    const key = `o'1"x\\y-${randomUUID().slice(0, 8)}`;
    const parked = await ParkedKeys.load(pool, PARKED, 'c', 'order', [key]);
    const error = await failure(
      applyMany(pool, 'inbox', 'c', [{ id }], {
        calls: calls(async (tx, item) => {
          await effect(tx, item);
          // Another router dead-letters an earlier event of the key and parks it, committing at once.
          await pool.query(`INSERT INTO ${PARKED} (consumer, aggregate_type, aggregate_id, event_id, error_code) VALUES ('c', 'order', $1, $2, 'HANDLER_FAILED')`, [key, randomUUID()]);
        }),
        guard: parked.guard([key]),
      }),
    );
    expect(error).toBeInstanceOf(InboxUnavailable);
    expect((error as InboxUnavailable).cause).toBeInstanceOf(ParkedKeysStale);
    expect(((error as InboxUnavailable).cause as ParkedKeysStale).keys).toEqual([key]);
    expect([await rows('inbox', id), await rows('effects', id)]).toEqual([0, 0]);
  });

  it('an error a deferred trigger raises at COMMIT (here with the check\'s own SQLSTATE) is the handler\'s failure, to retry and dead-letter, not a database outage to wait out', async () => {
    await pool.query(`CREATE OR REPLACE FUNCTION effects_check() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.note = 'bad' THEN PERFORM 1 / 0; END IF; RETURN NULL; END $$`);
    await pool.query('CREATE CONSTRAINT TRIGGER effects_check AFTER INSERT ON effects DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION effects_check()');
    const id = randomUUID();
    const error = await failure(applyMany(pool, 'inbox', 'c', [{ id }], { calls: calls((tx, item) => tx.query("INSERT INTO effects (id, note) VALUES ($1, 'bad')", [item.id]).then(() => {})) }));
    expect(error).toBeInstanceOf(HandlerFailed);
    expect(isOutboxError((error as HandlerFailed).cause, 'HANDLER_ENDED_TRANSACTION')).toBe(false);
    expect(((error as HandlerFailed).cause as { code?: string }).code).toBe('22012');
    expect([await rows('inbox', id), await rows('effects', id)]).toEqual([0, 0]);
    // The event is not remembered as one whose handler ended the transaction: a fixed handler applies it.
    await expect(applyMany(pool, 'inbox', 'c', [{ id }], { calls: calls(effect) })).resolves.toEqual(['applied']);
  });

  it('hints: a load that finds no parked row makes the next loads read nothing, until a key is parked', async () => {
    const hints = new ParkedHints();
    const type = `t${randomUUID().slice(0, 8)}`;
    let reads = 0;
    const watched = new Proxy(pool, {
      get(target, prop, receiver) {
        if (prop === 'query') return (...args: unknown[]) => ((reads += 1), (target.query as (...a: unknown[]) => Promise<unknown>)(...args));
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    await ParkedKeys.load(watched, PARKED, 'c', type, ['k1']);
    expect(reads).toBe(1);
    const first = await ParkedKeys.load(watched, PARKED, 'c', type, ['k1'], hints);
    expect([reads, hints.knownEmpty(type)]).toEqual([2, true]);
    await ParkedKeys.load(watched, PARKED, 'c', type, ['k2'], hints);
    expect(reads).toBe(2);
    // This router parks a key: the hint goes, and the next batch reads the heads again.
    await first.park('k1', randomUUID(), 'HANDLER_FAILED');
    expect(hints.knownEmpty(type)).toBe(false);
    const next = await ParkedKeys.load(watched, PARKED, 'c', type, ['k1'], hints);
    expect(next.earliest('k1')).toBeDefined();
    // Released by an operator: the next load sees an empty table and the hint comes back.
    await pool.query(`DELETE FROM ${PARKED} WHERE aggregate_type = $1`, [type]);
    await ParkedKeys.load(watched, PARKED, 'c', type, ['k1'], hints);
    expect(hints.knownEmpty(type)).toBe(true);
  });
});
