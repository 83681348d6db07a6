/**
 * Least privilege, proven by logging in AS each provisioned role with its password: the CDC role
 * replicates and reads what Debezium needs and writes nothing else; the monitoring role reads the
 * replication and statistics views and no data; the application role inserts events and can touch
 * no other transaction's rows; the router writes the inbox and the parked keys only; the polling relay
 * claims, marks and deletes outbox rows but cannot insert them. Fresh database, role names of this file only.
 */
import { Client } from 'pg';
import type { OutboxConfig } from '../../src/config';
import { heartbeatQuery } from '../../src/connector';
import { ensureOutboxPolicies, provision } from '../../src/provision';
import { createOutboxWriter, type PayloadEncoder } from '../../src/producer';
import { buildRelaySql } from '../../src/relay/sql';
import { applyOnce } from '../../src/router/inbox-transaction';
import { pruneInboxSql } from '../../src/router/inbox-retention';
import { createPool, qualified } from '../../src/db';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, pgConfig, randomIdentifier, withClient, type FreshDatabase } from '../support/stack-env';

jest.setTimeout(120_000);

const DENIED = { code: '42501' }; // insufficient_privilege

let db: FreshDatabase;
let config: OutboxConfig;
const OTHER_ID = '00000000-0000-4000-8000-0000000000aa';

type Role = 'cdc' | 'app' | 'monitor' | 'router' | 'relay';
const ROLES: Role[] = ['cdc', 'app', 'monitor', 'router', 'relay'];

async function asRole<T>(role: Role, body: (c: Client) => Promise<T>): Promise<T> {
  const password = config.roles[`${role}Password`];
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
  config = testConfig(db.name, {
    roles: { cdcPassword: `${pw}-cdc`, appPassword: `${pw}-app`, monitorPassword: `${pw}-mon`, routerPassword: `${pw}-rt`, relayPassword: `${pw}-rl` },
  });
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
    for (const role of ROLES.map((r) => config.roles[r])) await c.query(`DROP ROLE IF EXISTS ${c.escapeIdentifier(role)}`).catch(() => {});
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

  it('reads of the outbox only created_at and published_at (the outbox health query), never payloads or keys', async () => {
    await asRole('monitor', async (c) => {
      await expect(c.query('SELECT min(created_at) FROM outbox WHERE published_at IS NULL')).resolves.toBeDefined();
      for (const column of ['payload', 'aggregate_id', 'headers', 'id']) await expect(c.query(`SELECT ${column} FROM outbox`)).rejects.toMatchObject(DENIED);
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

describe('the router role', () => {
  const parkRow = (eventId: string) =>
    `INSERT INTO inbox_parked (consumer, aggregate_type, aggregate_id, event_id, error_code) VALUES ('billing', 'order', '7', '${eventId}', 'HANDLER_FAILED') ON CONFLICT DO NOTHING`;

  it("applies an event once through the router's inbox transaction", async () => {
    const pool = createPool({ ...config.database, user: config.roles.router, password: config.roles.routerPassword as string });
    try {
      const inbox = qualified(config.outbox.schema, config.outbox.inboxTable);
      const messageId = '00000000-0000-4000-8000-0000000000e1';
      expect(await applyOnce(pool, inbox, 'billing', messageId, async () => {})).toBe('applied');
      expect(await applyOnce(pool, inbox, 'billing', messageId, async () => {})).toBe('duplicate');
    } finally {
      await pool.end();
    }
  });

  it('parks, lists and releases dead-lettered keys (the serial sequence included)', async () => {
    await asRole('router', async (c) => {
      await c.query(parkRow('e-1'));
      await c.query(parkRow('e-2'));
      const parked = await c.query("SELECT event_id FROM inbox_parked WHERE consumer = 'billing' ORDER BY seq");
      expect(parked.rows.map((r) => r.event_id)).toEqual(['e-1', 'e-2']);
      expect((await c.query("DELETE FROM inbox_parked WHERE consumer = 'billing'")).rowCount).toBe(2);
    });
  });

  it('prunes its inbox with the prune statement (DELETE on the inbox, migration 010)', async () => {
    await asRole('router', async (c) => {
      await c.query("INSERT INTO inbox (consumer, message_id, processed_at) VALUES ('pruner', gen_random_uuid(), now() - interval '40 days'), ('pruner', gen_random_uuid(), now())");
      const pruned = await c.query(pruneInboxSql('inbox', 'inbox_parked'), ['pruner', 30 * 86_400_000, 100]);
      expect(pruned.rowCount).toBe(1);
    });
  });

  it('cannot read or write the outbox, the heartbeat, the migrations or business tables, nor create objects', async () => {
    await asRole('router', async (c) => {
      for (const table of ['outbox', 'outbox_heartbeat', 'outbox_migrations', 'orders']) {
        await expect(c.query(`SELECT * FROM ${table}`)).rejects.toMatchObject(DENIED);
      }
      await expect(c.query(insertRow('00000000-0000-4000-8000-0000000000e2'))).rejects.toMatchObject(DENIED);
      await expect(c.query('DELETE FROM outbox')).rejects.toMatchObject(DENIED);
      await expect(c.query('UPDATE outbox SET attempts = 1')).rejects.toMatchObject(DENIED);
      await expect(c.query('UPDATE inbox SET processed_at = now()')).rejects.toMatchObject(DENIED);
      await expect(c.query('TRUNCATE inbox_parked')).rejects.toMatchObject(DENIED);
      await expect(c.query('CREATE TABLE public.router_made (id int)')).rejects.toMatchObject(DENIED);
    });
    expect(await outboxIds()).toEqual([OTHER_ID]);
  });
});

describe('the relay role', () => {
  const MINE = ['00000000-0000-4000-8000-0000000000f1', '00000000-0000-4000-8000-0000000000f2'];

  it("claims, marks and deletes outbox rows with the relay's own statements", async () => {
    await admin(async (c) => {
      for (const id of MINE) await c.query(insertRow(id));
    });
    const sql = buildRelaySql(config.outbox.schema, config.outbox.table);
    await asRole('relay', async (c) => {
      await c.query('BEGIN');
      // one worker: shard 0 of 1, batch of 10, no blocked keys, 1 MiB; the shard's advisory lock is taken inside
      const claimed = await c.query<{ id: string }>(sql.claim, ['relay-test-shards', 0, 1, 10, [], 1024 * 1024]);
      expect(claimed.rows.map((r) => r.id)).toEqual(expect.arrayContaining(MINE));
      await c.query(sql.mark, [MINE, MINE]);
      await c.query('COMMIT');
      expect((await c.query(sql.cleanup, [0, 10])).rowCount).toBe(2);
      await expect(c.query(sql.join, ['relay-test-members', 1])).resolves.toBeDefined();
    });
    expect(await outboxIds()).toEqual([OTHER_ID]);
  });

  it("cannot insert events, change their content, or touch the inbox, parked keys or business tables", async () => {
    await asRole('relay', async (c) => {
      await expect(c.query(insertRow('00000000-0000-4000-8000-0000000000f3'))).rejects.toMatchObject(DENIED);
      await expect(c.query("UPDATE outbox SET payload = '\\x00'")).rejects.toMatchObject(DENIED);
      await expect(c.query("UPDATE outbox SET aggregate_type = 'other'")).rejects.toMatchObject(DENIED);
      for (const table of ['inbox', 'inbox_parked', 'outbox_heartbeat', 'outbox_migrations', 'orders']) {
        await expect(c.query(`SELECT * FROM ${table}`)).rejects.toMatchObject(DENIED);
      }
      await expect(c.query('CREATE TABLE public.relay_made (id int)')).rejects.toMatchObject(DENIED);
    });
    expect(await outboxIds()).toEqual([OTHER_ID]);
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
  it("puts back the router's parked-table grants revoked by hand, and takes back grants on it made by hand", async () => {
    await admin(async (c) => {
      const { app, router } = config.roles;
      await c.query(`REVOKE INSERT, DELETE ON inbox_parked FROM ${c.escapeIdentifier(router)}`);
      await c.query(`REVOKE USAGE ON SEQUENCE inbox_parked_seq_seq FROM ${c.escapeIdentifier(router)}`);
      await c.query(`GRANT ALL ON inbox_parked TO ${c.escapeIdentifier(app)}`);
    });
    await asRole('router', (c) => expect(c.query("INSERT INTO inbox_parked (consumer, aggregate_type, aggregate_id, event_id, error_code) VALUES ('c', 'a', 'k', 'e', 'X')")).rejects.toMatchObject(DENIED));
    await provision(config);
    await asRole('router', async (c) => {
      await c.query("INSERT INTO inbox_parked (consumer, aggregate_type, aggregate_id, event_id, error_code) VALUES ('c', 'a', 'k', 'e', 'X')");
      expect((await c.query("DELETE FROM inbox_parked WHERE consumer = 'c'")).rowCount).toBe(1);
    });
    await asRole('app', (c) => expect(c.query('SELECT * FROM inbox_parked')).rejects.toMatchObject(DENIED));
  });

  it('revokes CREATE on schema public from PUBLIC, as PostgreSQL 13 and 14 grant it (CVE-2018-1058)', async () => {
    // PostgreSQL 15+ no longer grants it by default: put back what 13 and 14 have.
    await admin((c) => c.query('GRANT CREATE ON SCHEMA public TO PUBLIC'));
    await asRole('router', (c) => c.query('CREATE TABLE public.planted (id int)'));
    await admin((c) => c.query('DROP TABLE public.planted'));
    await provision(config);
    for (const role of ROLES) {
      await asRole(role, (c) => expect(c.query('CREATE TABLE public.planted (id int)')).rejects.toMatchObject(DENIED));
    }
    const acl = await admin((c) => c.query("SELECT count(*)::int AS n FROM pg_namespace, aclexplode(nspacl) a WHERE nspname = 'public' AND a.grantee = 0 AND a.privilege_type = 'CREATE'"));
    expect(acl.rows[0].n).toBe(0);
    await provision(config); // idempotent where already revoked
  });
});
