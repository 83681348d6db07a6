import type { Pool } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { createPool, inboxIdType } from '../../src/db';
import { isOutboxError } from '../../src/errors';
import { loadMigrations, provision } from '../../src/provision';
import { renderSql } from '../../src/provision/sql-files';
import { applyMany, InboxUnavailable } from '../../src/router/inbox-transaction';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(120_000);

const UUID = '0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77';

/**
 * Event ids that are not UUIDs (a Debezium outbox's bigint or text ids) in the real inbox: migration 013
 * (message_id text) dedups them exactly, UUIDs keep one key whatever their case, and an inbox still on
 * uuid ids (as migration 002 made it) refuses them with the migration's name, and keeps working for UUIDs.
 */
describe('inbox ids that are not UUIDs', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;

  beforeAll(async () => {
    db = await freshDatabase('textids');
    config = testConfig(db.name);
    await provision(config);
    pool = createPool(config.database, { max: 4 });
  });

  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  const apply = (table: string, ids: string[], ran: string[] = []) =>
    applyMany(pool, table, 'c', ids.map((id) => ({ id })), { calls: (fresh) => fresh.map((item) => ({ items: [item], run: async () => void ran.push(item.id) })) });

  it('after migration 013: bigint and text ids are applied once each, case kept; a UUID is one key in any case', async () => {
    expect(await inboxIdType(pool, '"public"."inbox"')).toBe('text');
    const ran: string[] = [];
    expect(await apply('"public"."inbox"', ['1000000000001', 'Order-7A', 'order-7a', UUID.toUpperCase()], ran)).toEqual(['applied', 'applied', 'applied', 'applied']);
    expect(await apply('"public"."inbox"', ['1000000000001', 'order-7a', 'Order-7A', UUID, '1000000000002'], ran)).toEqual(['duplicate', 'duplicate', 'duplicate', 'duplicate', 'applied']);
    // One chunk with a new id and a duplicate differing only in case: each judged by its own key.
    expect(await apply('"public"."inbox"', ['ORDER-7A', 'Order-7A'], ran)).toEqual(['applied', 'duplicate']);
    expect(ran).toEqual(['1000000000001', 'Order-7A', 'order-7a', UUID.toUpperCase(), '1000000000002', 'ORDER-7A']);
    const rows = await pool.query<{ id: string }>("SELECT message_id AS id FROM inbox WHERE consumer = 'c' ORDER BY message_id");
    expect(rows.rows.map((r) => r.id)).toEqual(['0b7e3c1c-8a63-4c9a-9a51-0d2a8c1f5e77', '1000000000001', '1000000000002', 'ORDER-7A', 'Order-7A', 'order-7a'].sort());
  });

  it('before it: a uuid inbox takes UUIDs, refuses other ids naming migration 013, and the migration keeps its rows as their keys', async () => {
    await pool.query('CREATE TABLE old_inbox (consumer text NOT NULL, message_id uuid NOT NULL, processed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (consumer, message_id))');
    const table = '"public"."old_inbox"';
    expect(await inboxIdType(pool, table)).toBe('uuid');
    expect(await apply(table, [UUID])).toEqual(['applied']);
    const refused = await apply(table, ['42']).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InboxUnavailable);
    const cause = (refused as InboxUnavailable).cause;
    expect(isOutboxError(cause, 'RECORD_INVALID') && cause.message).toMatch(/"42" is not a UUID.*013_inbox_text_ids/);

    const migration = loadMigrations().find((m) => m.name === 'inbox_text_ids');
    expect(migration?.id).toBe(13);
    await pool.query(renderSql(migration?.template as string, { ...config, outbox: { ...config.outbox, inboxTable: 'old_inbox' } }, 'sql/migrations/013_inbox_text_ids.sql'));
    // A new pool: the column type is read once per pool and table.
    const after = createPool(config.database, { max: 2 });
    try {
      expect(await inboxIdType(after, table)).toBe('text');
      const results = await applyMany(after, table, 'c', [{ id: UUID.toUpperCase() }, { id: '42' }], { calls: (fresh) => fresh.map((item) => ({ items: [item], run: async () => {} })) });
      expect(results).toEqual(['duplicate', 'applied']);
    } finally {
      await after.end();
    }
  });
});
