import { Client } from 'pg';
import { POSTGRES } from '../../scripts/stack/settings';
import { freshDatabase, randomIdentifier, type FreshDatabase } from '../support/stack-env';

describe('native stack: PostgreSQL', () => {
  let db: FreshDatabase;
  let client: Client;

  beforeAll(async () => {
    db = await freshDatabase('smoke_pg');
    client = new Client(db.config);
    await client.connect();
  });

  afterAll(async () => {
    await client?.end();
    await db?.drop();
  });

  it('runs with wal_level=logical and room for several connectors', async () => {
    const { rows } = await client.query<{ wal_level: string; slots: string; senders: string }>(
      "SELECT current_setting('wal_level') AS wal_level, current_setting('max_replication_slots') AS slots, current_setting('max_wal_senders') AS senders",
    );
    expect(rows[0]?.wal_level).toBe('logical');
    expect(Number(rows[0]?.slots)).toBeGreaterThanOrEqual(POSTGRES.maxReplicationSlots);
    expect(Number(rows[0]?.senders)).toBeGreaterThanOrEqual(POSTGRES.maxWalSenders);
  });

  it('creates a pgoutput logical slot that decodes a committed insert, and drops it', async () => {
    const slot = randomIdentifier('smoke_slot');
    await client.query('CREATE TABLE smoke_outbox (id int PRIMARY KEY, note text)');
    await client.query('CREATE PUBLICATION smoke_pub FOR TABLE smoke_outbox');
    await client.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [slot]);

    const listed = await client.query('SELECT plugin, slot_type, database FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    expect(listed.rows).toEqual([{ plugin: 'pgoutput', slot_type: 'logical', database: db.name }]);

    await client.query("INSERT INTO smoke_outbox VALUES (1, 'committed')");
    await client.query('BEGIN');
    await client.query("INSERT INTO smoke_outbox VALUES (2, 'rolled back')");
    await client.query('ROLLBACK');
    // pgoutput messages: B(egin), R(elation), I(nsert), C(ommit). A rolled-back transaction sends nothing.
    const changes = await client.query<{ data: Buffer }>(
      "SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', 'smoke_pub')",
      [slot],
    );
    const kinds = changes.rows.map((r) => String.fromCharCode(r.data[0] as number));
    expect(kinds).toEqual(['B', 'R', 'I', 'C']);
    const insert = changes.rows[2]?.data.toString('latin1') ?? '';
    expect(insert).toContain('committed');
    expect(insert).not.toContain('rolled back');

    await client.query('SELECT pg_drop_replication_slot($1)', [slot]);
    const after = await client.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    expect(after.rowCount).toBe(0);
  });
});
