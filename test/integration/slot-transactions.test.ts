/**
 * The drop guard (connector:delete --drop-slot) and the switch to the relay decide per transaction,
 * on PostgreSQL alone: a pgoutput slot moved by hand (pg_replication_slot_advance plays the connector
 * confirming), no Connect. A transaction that inserted before the slot's position and committed after
 * it was not published; a row the relay has published since is not lost with the slot.
 */
import { randomUUID } from 'node:crypto';
import { Client, type Pool } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { switchToRelay, type ConnectClient } from '../../src/connector';
import { withAdmin } from '../../src/connector/database';
import { dropRefusal, readUnconfirmed } from '../../src/connector/drop-guard';
import { parseLsn } from '../../src/connector/slot-guard';
import { clientConfig, createPool } from '../../src/db';
import { createLogger } from '../../src/log';
import { provision } from '../../src/provision';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomIdentifier, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(120_000);

let db: FreshDatabase;
let config: OutboxConfig;
let pool: Pool;
/** No connector is deployed: the switch reads the slot alone. */
const noConnect = { getConfig: async () => undefined } as unknown as ConnectClient;
const log = createLogger({ level: 'silent' });

beforeAll(async () => {
  db = await freshDatabase('slottx');
  config = testConfig(db.name, { connector: { slotName: randomIdentifier('slottx') } });
  await provision(config);
  pool = createPool(config.database, { max: 4 });
});
afterAll(async () => {
  await pool?.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [config.connector.slotName]).catch(() => {});
  await pool?.end();
  await db?.drop();
});

async function insert(client: Pick<Pool, 'query'>, tag: string): Promise<string> {
  const id = randomUUID();
  await client.query(
    `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES ($1, 'order', $2, 'OrderPlaced', convert_to('{}', 'UTF8'), 'application/json')`,
    [id, tag],
  );
  return id;
}

const slot = () => config.connector.slotName;
const peekCommits = async () =>
  (await pool.query<{ xid: string; lsn: string }>(
    "SELECT xid::text, lsn::text FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2) WHERE get_byte(data, 0) = 67",
    [slot(), config.outbox.publication],
  )).rows;
const guard = () => withAdmin(config, (c) => readUnconfirmed(c, config, slot(), undefined, 5_000));
const published = async (ids: string[]) =>
  (await pool.query<{ id: string; published: boolean }>('SELECT id::text, published_at IS NOT NULL AS published FROM outbox WHERE id = ANY($1::uuid[]) ORDER BY id', [ids])).rows;

/**
 * A opens and inserts; B inserts and commits; the slot confirms B's commit; then A commits. A's insert
 * was written before the slot's position, its commit lies after it: A was never published.
 */
async function straddle(): Promise<{ a: string; b: string }> {
  const open = new Client(clientConfig(config.database));
  await open.connect();
  try {
    await open.query('BEGIN');
    const a = await insert(open, 'a');
    const txA = (await open.query<{ x: string }>('SELECT pg_current_xact_id()::text AS x')).rows[0]!.x;
    const b = await insert(pool, 'b');
    const commits = await peekCommits();
    const bEnd = commits[commits.length - 1]!.lsn;
    await pool.query('SELECT pg_replication_slot_advance($1, $2::pg_lsn)', [slot(), bEnd]);
    await open.query('COMMIT');
    // A is the only transaction past the position, and its insert lies before it.
    const after = await peekCommits();
    expect(after.map((c) => BigInt(c.xid))).toEqual([BigInt(txA) % 2n ** 32n]);
    return { a, b };
  } finally {
    await open.end();
  }
}

describe('per transaction, not per change', () => {
  beforeEach(async () => {
    await pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [slot()]);
    await pool.query('DELETE FROM outbox');
    await pool.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot()]);
  });

  it('the drop guard counts a transaction that inserted before the position and committed after it', async () => {
    await straddle();
    const work = await guard();
    expect(work?.outboxRows).toBe(1);
    expect(work?.unpublishedTransactions).toBe(1);
    expect(dropRefusal('c', work)?.code).toBe('CONNECTOR_DELETE_UNSAFE');
  });

  it('the switch leaves that transaction’s row for the relay and marks the one the slot confirmed', async () => {
    const { a, b } = await straddle();
    const report = await switchToRelay(config, { client: noConnect, log });
    expect(report).toMatchObject({ unpublishedTransactions: 1, markedPublished: 1, leftForRelay: 1 });
    expect(await published([a, b])).toEqual([{ id: a, published: false }, { id: b, published: true }].sort((x, y) => x.id.localeCompare(y.id)));
  });

  it('after the switch, the guard refuses until the relay has published what was left to it, then no more (deleted after publishing included)', async () => {
    const { a } = await straddle();
    await switchToRelay(config, { client: noConnect, log });
    // Written after the switch: the relay's too (the connector stays stopped).
    const later = await insert(pool, 'later');
    const before = await guard();
    expect(before).toMatchObject({ outboxRows: 2, handedToRelay: true });
    expect(dropRefusal('c', before)).toBeDefined();

    // The relay publishes (its mark: published_at), then its retention deletes one of them.
    await pool.query('UPDATE outbox SET published_at = now() WHERE id = ANY($1::uuid[])', [[a, later]]);
    const after = await guard();
    expect(after).toMatchObject({ outboxRows: 0, unpublishedTransactions: 2, handedToRelay: true });
    expect(dropRefusal('c', after)).toBeUndefined();
    await pool.query('DELETE FROM outbox WHERE id = $1', [a]);
    expect((await guard())?.outboxRows).toBe(0);
  });

  it('without a switch, a row deleted in its own transaction (insert-then-delete) still counts: the event exists only in the WAL', async () => {
    await insert(pool, 'seen');
    const commits = await peekCommits();
    await pool.query('SELECT pg_replication_slot_advance($1, $2::pg_lsn)', [slot(), commits[commits.length - 1]!.lsn]);
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      const id = await insert(c, 'gone');
      await c.query('DELETE FROM outbox WHERE id = $1', [id]);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
    expect(await guard()).toMatchObject({ outboxRows: 1, handedToRelay: false });
  });

  it('a row without tx_id (as written before migration 011) in a transaction the slot has not published stays for the relay, whatever its xid', async () => {
    const id = randomUUID();
    // A transaction whose xid comes after the one that applied 011 can still have written a row without
    // the column (its INSERT ran before 011's ALTER took its lock): the xid alone proves nothing.
    await pool.query(
      `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type, tx_id) VALUES ($1, 'order', 'legacy', 'OrderPlaced', convert_to('{}', 'UTF8'), 'application/json', NULL)`,
      [id],
    );
    const report = await switchToRelay(config, { client: noConnect, log });
    expect(report).toMatchObject({ unpublishedTransactions: 1, markedPublished: 0 });
    expect(await published([id])).toEqual([{ id, published: false }]);
  });

  it('a switch message counts only past the connector’s commit position: back on CDC, a gone row after it still counts', async () => {
    await insert(pool, 'before');
    await switchToRelay(config, { client: noConnect, log });
    // Back to CDC: Debezium streams the switch's message and stores an offset past it, without the slot
    // confirming yet; then an insert-then-delete event follows.
    const pastSwitch = (await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn;
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      const gone = await insert(c, 'gone');
      await c.query('DELETE FROM outbox WHERE id = $1', [gone]);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
    const offset = { lsn_commit: Number(parseLsn(pastSwitch)), lsn_proc: Number(parseLsn(pastSwitch)), lsn: Number(parseLsn(pastSwitch)) };
    const work = await withAdmin(config, (db2) => readUnconfirmed(db2, config, slot(), offset, 5_000));
    expect(work).toMatchObject({ outboxRows: 1, handedToRelay: false });
    expect(dropRefusal('c', work)?.code).toBe('CONNECTOR_DELETE_UNSAFE');
  });

  it('a peek voids the CDC cleanup’s marks of the slot (it raises the slot’s statistics without confirming anything)', async () => {
    await pool.query("INSERT INTO outbox_cleanup_registrations (slot_name, registered_by) VALUES ($1, 'test') ON CONFLICT DO NOTHING", [slot()]);
    await pool.query('SELECT * FROM outbox_cleanup($1, 10)', [slot()]);
    const marks = async () => Number((await pool.query<{ n: string }>('SELECT count(*)::text AS n FROM outbox_cleanup_marks WHERE slot_name = $1', [slot()])).rows[0]!.n);
    expect(await marks()).toBe(1);
    await guard();
    expect(await marks()).toBe(0);
  });

  it('the stored offset’s last event: its transaction is published up to that event, the rest of it is not', async () => {
    await insert(pool, 'first');
    const prior = (await peekCommits())[0]!.lsn;
    await pool.query('SELECT pg_replication_slot_advance($1, $2::pg_lsn)', [slot(), prior]);
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      for (const tag of ['x1', 'x2', 'x3']) await insert(c, tag);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
    const inserts = (await pool.query<{ xid: string; n: string }>(
      "SELECT xid::text, pg_wal_lsn_diff(lsn, '0/0')::text AS n FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2) WHERE get_byte(data, 0) = 73",
      [slot(), config.outbox.publication],
    )).rows;
    expect(inserts).toHaveLength(3);
    const offset = (i: number) => ({ lsn_commit: Number(parseLsn(prior)), lsn_proc: Number(inserts[i]!.n), lsn: Number(inserts[i]!.n), txId: Number(inserts[i]!.xid) });
    const at = (i: number) => withAdmin(config, (db2) => readUnconfirmed(db2, config, slot(), offset(i), 5_000));
    expect((await at(1))?.outboxRows).toBe(1);
    expect((await at(2))?.outboxRows).toBe(0);
  });
});
