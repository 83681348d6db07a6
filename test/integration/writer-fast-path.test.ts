import type { Pool } from 'pg';
import { createCodec, JSON_CONTENT_TYPE } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { createPool } from '../../src/db';
import { createOutboxWriter, type OutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(60_000);

/** writeWith on the real database: the business statement and the outbox row as one statement. */
describe('writer fast path (writeWith)', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let writer: OutboxWriter;
  const until = waitsUpTo(10_000);
  const event = (id: string, type = 'AccountChanged') => ({ aggregateType: 'account', aggregateId: id, type, payload: { id } });
  const seqOf = async (eventId: string) => Number((await pool.query<{ seq: string }>('SELECT seq FROM outbox WHERE id = $1', [eventId])).rows[0]?.seq);

  beforeAll(async () => {
    db = await freshDatabase('writer_fast');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 4 });
    await pool.query('CREATE TABLE accounts (id text PRIMARY KEY, balance int NOT NULL)');
    writer = createOutboxWriter({ outbox: config.outbox, codec: createCodec({ registry: config.registry }), contentType: JSON_CONTENT_TYPE });
  });

  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  it('autocommits the business row and its event together through a pool, and again with the prepared statement', async () => {
    for (const id of ['a-1', 'a-2']) {
      const { events } = await writer.writeWith(pool, { text: 'INSERT INTO accounts (id, balance) VALUES ($1, $2)', values: [id, 10] }, [event(id, 'AccountOpened')]);
      const row = await pool.query('SELECT aggregate_id, event_type FROM outbox WHERE id = $1', [events[0]?.id]);
      expect(row.rows).toEqual([{ aggregate_id: id, event_type: 'AccountOpened' }]);
    }
    expect((await pool.query('SELECT count(*)::int AS n FROM accounts')).rows[0].n).toBe(2);
  });

  it('a failing business statement writes no event', async () => {
    await expect(writer.writeWith(pool, { text: 'INSERT INTO accounts (id, balance) VALUES ($1, $2)', values: ['a-1', 10] }, [event('a-1')])).rejects.toThrow(/duplicate key/);
    expect((await pool.query("SELECT count(*)::int AS n FROM outbox WHERE aggregate_id = 'a-1'")).rows[0].n).toBe(1);
  });

  it('returning: true gives the business rows and numbers the event after the business row lock (relay order)', async () => {
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("UPDATE accounts SET balance = balance + 1 WHERE id = 'a-2'"); // holds a-2's row lock
      const second = writer.writeWith<{ balance: number }>(
        pool,
        { text: 'UPDATE accounts SET balance = balance + 5 WHERE id = $1 RETURNING balance', values: ['a-2'] },
        [event('a-2')],
        { returning: true },
      );
      // The second statement is waiting on the lock; the first transaction now writes its own event and commits.
      await until('second statement waiting on the row lock', async () => (await pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")).rows[0].n, (n: number) => n >= 1);
      const first = await writer.writeEvent(holder, event('a-2'));
      await holder.query('COMMIT');
      const { rows, events } = await second;
      expect(rows).toEqual([{ balance: 16 }]);
      expect(await seqOf(events[0]?.id as string)).toBeGreaterThan(await seqOf(first.id));
    } finally {
      holder.release();
    }
  });
});
