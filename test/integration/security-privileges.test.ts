/**
 * Least privilege, proven by logging in AS each provisioned role with its password: the CDC role
 * replicates and reads what Debezium needs and writes nothing else; the monitoring role reads the
 * replication and statistics views and no data; the application role inserts events and can touch
 * no other transaction's rows. Fresh database, role names of this file only.
 */
import { Client } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { heartbeatQuery } from '../../src/connector';
import { ensureOutboxPolicies, provision } from '../../src/provision';
import { createOutboxWriter, type PayloadEncoder } from '../../src/producer';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, pgConfig, randomIdentifier, withClient, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(120_000);

const DENIED = { code: '42501' }; // insufficient_privilege

let db: FreshDatabase;
let config: OutboxConfig;
const OTHER_ID = '00000000-0000-4000-8000-0000000000aa';

async function asRole<T>(role: 'cdc' | 'app' | 'monitor', body: (c: Client) => Promise<T>): Promise<T> {
  const password = { cdc: config.roles.cdcPassword, app: config.roles.appPassword, monitor: config.roles.monitorPassword }[role];
  const client = new Client({ ...pgConfig(db.name), user: config.roles[role], password });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

const admin = <T>(body: (c: Client) => Promise<T>) => withClient(db.name, body);
const insertRow = (id: string) =>
  `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type) VALUES ('${id}', 'order', '1', 'OrderCreated', '\\x7b7d', 'application/json')`;
const outboxIds = async () => (await admin((c) => c.query<{ id: string }>('SELECT id FROM outbox ORDER BY id'))).rows.map((r) => r.id);
const jsonEncoder: PayloadEncoder = { encode: async (_a, _t, payload) => Buffer.from(JSON.stringify(payload)) };

beforeAll(async () => {
  db = await freshDatabase('sec_priv');
  // Distinct passwords per role, so a login that works proves the verifier of that role.
  const pw = randomIdentifier('pw');
  config = testConfig(db.name, { roles: { cdcPassword: `${pw}-cdc`, appPassword: `${pw}-app`, monitorPassword: `${pw}-mon` } });
  await provision(config);
  await admin(async (c) => {
    await c.query('CREATE TABLE orders (id int PRIMARY KEY, note text)');
    await c.query("INSERT INTO orders VALUES (1, 'business')");
    await c.query(insertRow(OTHER_ID)); // another transaction's event, committed
  });
});

afterAll(async () => {
  await db.drop();
  await withClient('postgres', async (c) => {
    for (const role of [config.roles.cdc, config.roles.app, config.roles.monitor]) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
  });
});

describe('the CDC role (Debezium)', () => {
  it('is a REPLICATION login without superuser, database or role creation rights', async () => {
    const attrs = await asRole('cdc', (c) => c.query('SELECT rolreplication, rolsuper, rolcreatedb, rolcreaterole, rolbypassrls FROM pg_roles WHERE rolname = current_user'));
    expect(attrs.rows[0]).toEqual({ rolreplication: true, rolsuper: false, rolcreatedb: false, rolcreaterole: false, rolbypassrls: false });
  });

  it('reads the outbox and the heartbeat, runs the heartbeat upsert, and decodes the publication through pgoutput', async () => {
    const slot = randomIdentifier('sec_tmp');
    await asRole('cdc', async (c) => {
      expect((await c.query('SELECT id FROM outbox')).rows.map((r) => r.id)).toContain(OTHER_ID);
      await c.query(heartbeatQuery(config.outbox.schema, config.outbox.heartbeatTable));
      expect((await c.query('SELECT beat_at FROM outbox_heartbeat')).rowCount).toBe(1);
      // A temporary slot: dropped with this session even if the test fails.
      await c.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput', true)", [slot]);
      await admin((a) => a.query(insertRow('00000000-0000-4000-8000-0000000000bb')));
      const changes = await c.query("SELECT count(*)::int AS n FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)", [
        slot,
        config.outbox.publication,
      ]);
      expect(changes.rows[0].n).toBeGreaterThan(0);
      await c.query('SELECT pg_drop_replication_slot($1)', [slot]);
    });
    await admin((a) => a.query("DELETE FROM outbox WHERE id = '00000000-0000-4000-8000-0000000000bb'"));
  });

  it('cannot write the outbox, touch business tables, the inbox or the migrations, or create objects', async () => {
    await asRole('cdc', async (c) => {
      await expect(c.query(insertRow('00000000-0000-4000-8000-0000000000cc'))).rejects.toMatchObject(DENIED);
      await expect(c.query('UPDATE outbox SET attempts = 1')).rejects.toMatchObject(DENIED);
      await expect(c.query('DELETE FROM outbox')).rejects.toMatchObject(DENIED);
      await expect(c.query('TRUNCATE outbox')).rejects.toMatchObject(DENIED);
      await expect(c.query('SELECT * FROM orders')).rejects.toMatchObject(DENIED);
      await expect(c.query("INSERT INTO orders VALUES (2, 'x')")).rejects.toMatchObject(DENIED);
      await expect(c.query('UPDATE orders SET note = NULL')).rejects.toMatchObject(DENIED);
      await expect(c.query('DELETE FROM orders')).rejects.toMatchObject(DENIED);
      await expect(c.query('SELECT * FROM inbox')).rejects.toMatchObject(DENIED);
      await expect(c.query('SELECT * FROM outbox_migrations')).rejects.toMatchObject(DENIED);
      await expect(c.query('DELETE FROM outbox_heartbeat')).rejects.toMatchObject(DENIED);
      await expect(c.query('CREATE TABLE public.cdc_made (id int)')).rejects.toMatchObject(DENIED);
      await expect(c.query('CREATE PUBLICATION cdc_pub FOR TABLE orders')).rejects.toMatchObject(DENIED);
    });
    expect(await outboxIds()).toEqual([OTHER_ID]);
  });
});

describe('the monitoring role (watchdog)', () => {
  it('reads pg_replication_slots, pg_stat_replication, pg_stat_activity and the WAL position through pg_monitor', async () => {
    await asRole('monitor', async (c) => {
      const member = await c.query("SELECT pg_has_role(current_user, 'pg_monitor', 'MEMBER') AS m");
      expect(member.rows[0].m).toBe(true);
      await expect(c.query('SELECT slot_name, active, confirmed_flush_lsn, pg_current_wal_lsn() FROM pg_replication_slots')).resolves.toBeDefined();
      await expect(c.query('SELECT pid, state FROM pg_stat_replication')).resolves.toBeDefined();
      await expect(c.query('SELECT * FROM pg_stat_user_tables')).resolves.toBeDefined();
      // pg_read_all_stats: other sessions' rows are not "<insufficient privilege>"
      const activity = await c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename IS NOT NULL AND query <> '<insufficient privilege>'");
      expect(activity.rows[0].n).toBeGreaterThan(0);
    });
  });

  it('cannot read or write business tables or the outbox tables, nor replicate', async () => {
    await asRole('monitor', async (c) => {
      for (const table of ['outbox', 'inbox', 'outbox_heartbeat', 'outbox_migrations', 'orders']) {
        await expect(c.query(`SELECT * FROM ${table}`)).rejects.toMatchObject(DENIED);
      }
      await expect(c.query(insertRow('00000000-0000-4000-8000-0000000000dd'))).rejects.toMatchObject(DENIED);
      await expect(c.query("INSERT INTO orders VALUES (3, 'x')")).rejects.toMatchObject(DENIED);
      await expect(c.query('DELETE FROM outbox')).rejects.toMatchObject(DENIED);
      await expect(c.query("SELECT pg_create_logical_replication_slot('mon_slot_never', 'pgoutput', true)")).rejects.toMatchObject(DENIED);
    });
  });
});

describe('the application role', () => {
  it('inserts events through the writer, with and without deleteAfterInsert, also under a savepoint', async () => {
    const plain = createOutboxWriter({ outbox: config.outbox, codec: jsonEncoder, contentType: 'application/json' });
    const cleaning = createOutboxWriter({ outbox: config.outbox, codec: jsonEncoder, contentType: 'application/json', deleteAfterInsert: true });
    const kept = await asRole('app', async (c) => {
      await c.query('BEGIN');
      const written = await plain.writeEvent(c, { aggregateType: 'order', aggregateId: '7', type: 'OrderCreated', payload: { n: 1 } });
      await c.query('SAVEPOINT nested'); // an ORM's nested transaction: the delete must still see its row
      await cleaning.writeEvent(c, { aggregateType: 'order', aggregateId: '8', type: 'OrderCreated', payload: { n: 2 } });
      await c.query('RELEASE SAVEPOINT nested');
      await cleaning.writeEvent(c, { aggregateType: 'order', aggregateId: '9', type: 'OrderCreated', payload: { n: 3 } });
      // Its own transaction's rows are the only ones it sees: the kept one, not the deleted ones nor OTHER_ID.
      expect((await c.query('SELECT id FROM outbox')).rows.map((r) => r.id)).toEqual([written.id]);
      await c.query('COMMIT');
      return written.id;
    });
    expect((await outboxIds()).sort()).toEqual([OTHER_ID, kept].sort());
    await admin((a) => a.query('DELETE FROM outbox WHERE id = $1', [kept]));
  });

  it("cannot see, delete or change another transaction's events, read payloads, or forge bookkeeping columns", async () => {
    await asRole('app', async (c) => {
      expect((await c.query('SELECT id FROM outbox')).rowCount).toBe(0);
      expect((await c.query('DELETE FROM outbox WHERE id = $1', [OTHER_ID])).rowCount).toBe(0);
      expect((await c.query('DELETE FROM outbox')).rowCount).toBe(0);
      await expect(c.query('SELECT payload FROM outbox')).rejects.toMatchObject(DENIED);
      await expect(c.query('SELECT * FROM outbox')).rejects.toMatchObject(DENIED);
      await expect(c.query('UPDATE outbox SET attempts = 1')).rejects.toMatchObject(DENIED);
      await expect(c.query('TRUNCATE outbox')).rejects.toMatchObject(DENIED);
      for (const [column, value] of [['published_at', 'now()'], ['created_at', "'2000-01-01'"], ['attempts', '5']]) {
        await expect(
          c.query(
            `INSERT INTO outbox (id, aggregate_type, aggregate_id, event_type, payload, content_type, ${column}) VALUES (gen_random_uuid(), 'order', '1', 'OrderCreated', '\\x7b7d', 'application/json', ${value})`,
          ),
        ).rejects.toMatchObject(DENIED);
      }
    });
    expect(await outboxIds()).toEqual([OTHER_ID]);
  });

  it('cannot touch the inbox, the heartbeat, the migrations, business tables it was not granted, or replicate', async () => {
    await asRole('app', async (c) => {
      for (const table of ['inbox', 'outbox_heartbeat', 'outbox_migrations', 'orders']) {
        await expect(c.query(`SELECT * FROM ${table}`)).rejects.toMatchObject(DENIED);
      }
      await expect(c.query("INSERT INTO inbox (consumer, message_id) VALUES ('c', gen_random_uuid())")).rejects.toMatchObject(DENIED);
      await expect(c.query('UPDATE outbox_heartbeat SET beat_at = now()')).rejects.toMatchObject(DENIED);
      await expect(c.query("SELECT pg_create_logical_replication_slot('app_slot_never', 'pgoutput', true)")).rejects.toMatchObject(DENIED);
      await expect(c.query('CREATE TABLE public.app_made (id int)')).rejects.toMatchObject(DENIED);
    });
  });
});

describe('re-provisioning', () => {
  it('takes back grants, role attributes and policy changes made by hand, and is otherwise a no-op', async () => {
    await admin(async (c) => {
      const { app, cdc } = config.roles;
      await c.query(`GRANT ALL ON outbox, inbox TO ${c.escapeIdentifier(app)}, ${c.escapeIdentifier(cdc)}`);
      await c.query(`ALTER ROLE ${c.escapeIdentifier(app)} CREATEDB BYPASSRLS`);
      await c.query('DROP POLICY outbox_app_own_transaction ON outbox');
    });
    const report = await provision(config);
    expect(report.applied).toEqual([]);
    await asRole('app', async (c) => {
      await expect(c.query('UPDATE outbox SET attempts = 1')).rejects.toMatchObject(DENIED);
      await expect(c.query('SELECT * FROM inbox')).rejects.toMatchObject(DENIED);
      expect((await c.query('DELETE FROM outbox')).rowCount).toBe(0);
      const attrs = await c.query('SELECT rolcreatedb, rolbypassrls FROM pg_roles WHERE rolname = current_user');
      expect(attrs.rows[0]).toEqual({ rolcreatedb: false, rolbypassrls: false });
    });
    await asRole('cdc', async (c) => {
      await expect(c.query('DELETE FROM outbox')).rejects.toMatchObject(DENIED);
      await expect(c.query('SELECT * FROM inbox')).rejects.toMatchObject(DENIED);
    });
    expect(await outboxIds()).toEqual([OTHER_ID]);
    // Policies already right: nothing is dropped or created (no table lock on a busy outbox).
    expect(await admin((c) => ensureOutboxPolicies(c, config))).toBe(false);
    const policies = await admin((c) => c.query("SELECT policyname, permissive FROM pg_policies WHERE tablename = 'outbox' ORDER BY policyname"));
    expect(policies.rows).toEqual([
      { policyname: 'outbox_app_own_transaction', permissive: 'RESTRICTIVE' },
      { policyname: 'outbox_unrestricted', permissive: 'PERMISSIVE' },
    ]);
  });
});
