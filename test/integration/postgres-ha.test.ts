/**
 * The cluster profile's PostgreSQL pair (scripts/stack/postgres-ha.ts), for real: a PostgreSQL 17 primary
 * and synchronous standby on ports of this test's own (never the stack's), behind the proxy. It proves
 * the failover-slot mechanics the product relies on: a slot made with failover = true survives a
 * SIGKILL of the primary with every acknowledged commit after its confirmed position still decodable on
 * the promoted standby, while a slot made without it is gone. Then the old primary is rebuilt as the new
 * standby and the pair fails over back.
 *
 * Needs `npm run -s build` first (the proxy runs from build/scripts/stack/pg-proxy.js).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from 'pg';
import { defaultCacheDir, stackPaths, type StackPaths } from '../../scripts/stack/paths';
import { adminClient } from '../../scripts/stack/postgres';
import { downPair, failover, pairStatus, rebuildStandby, upPair, waitFailoverReady, type NodeName, type SlotState } from '../../scripts/stack/postgres-ha';
import { randomIdentifier } from '../support/stack-env';

jest.setTimeout(120_000);

const ports = { a: 55455, b: 55456, proxy: 55457 };
const options = { ports };
const portOf = (name: NodeName | 'proxy'): number => ports[name];

async function connect(port: number): Promise<Client> {
  const client = adminClient('app', port);
  client.on('error', () => {});
  await client.connect();
  return client;
}

async function query<T extends object>(port: number, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = await connect(port);
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The ids of the rows a pgoutput (proto_version 1) change stream inserts: 'I', relation oid, 'N', then the tuple. */
function insertedIds(messages: Buffer[]): number[] {
  const ids: number[] = [];
  for (const data of messages) {
    if (data[0] !== 0x49 /* I */ || data[5] !== 0x4e /* N */) continue;
    // tuple: int16 column count, then per column 't' + int32 length + text; the first column is the id
    if (data[8] !== 0x74 /* t */) throw new Error(`unexpected column kind ${String.fromCharCode(data[8] as number)}`);
    const length = data.readInt32BE(9);
    ids.push(Number(data.subarray(13, 13 + length).toString('utf8')));
  }
  return ids;
}

async function peekIds(port: number, slot: string, publication: string): Promise<number[]> {
  const rows = await query<{ data: Buffer }>(port, "SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)", [slot, publication]);
  return insertedIds(rows.map((r) => r.data));
}

/**
 * Consumes `slot` on the primary up to now and waits until the standby holds it as a persistent synced
 * copy at that position. What PostgreSQL 17's slot sync needs: the standby first copies the slot as
 * temporary, reserving WAL from its own position; it persists the copy only once the primary's slot has
 * moved past that point *and* decoding from there finds a consistent point before the slot's confirmed
 * position, that is an xl_running_xacts record in between (the bgwriter logs one every 15 s of activity;
 * pg_log_standby_snapshot() logs one now). So a slot is a usable failover slot only after it advanced
 * past a running-xacts record written after the standby took its copy. The sync worker naps up to 30 s
 * when nothing changed; pg_reload_conf() on the standby wakes it. The standby must also have replayed
 * up to the slot's position.
 */
async function syncToStandby(primary: number, standby: number, slot: string): Promise<SlotState> {
  const deadline = Date.now() + 40_000;
  let seen: SlotState | undefined;
  while (Date.now() < deadline) {
    await query(primary, 'SELECT pg_log_standby_snapshot()');
    const [remote] = await query<{ lsn: string }>(primary, 'SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slot_advance($1, pg_current_wal_lsn()) JOIN pg_replication_slots USING (slot_name)', [slot]);
    await query(standby, 'SELECT pg_reload_conf()');
    await sleep(300);
    [seen] = await query<SlotState>(standby, 'SELECT slot_name, slot_type, failover, synced, temporary, invalidation_reason, confirmed_flush_lsn::text, restart_lsn::text FROM pg_replication_slots WHERE slot_name = $1', [slot]);
    if (seen?.synced && !seen.temporary && seen.confirmed_flush_lsn === remote?.lsn) return seen;
  }
  throw new Error(`slot ${slot} not synced to the standby on ${standby}: ${JSON.stringify(seen)}`);
}

/** Commits one-row transactions through the proxy until stopped or refused; resolves with the acknowledged ids. */
function writer(table: string, firstId: number): { acked: number[]; stop: () => void; done: Promise<void> } {
  const acked: number[] = [];
  let stopped = false;
  const done = (async () => {
    const client = await connect(ports.proxy);
    try {
      for (let id = firstId; !stopped; id += 1) {
        await client.query(`INSERT INTO ${table} VALUES ($1, 'row')`, [id]);
        acked.push(id);
      }
    } catch {
      // the primary died under us (the proxy closed the connection): what was acknowledged is in `acked`
    } finally {
      await client.end().catch(() => {});
    }
  })();
  return { acked, stop: () => void (stopped = true), done };
}

describe('PostgreSQL 17 primary + synchronous standby with failover slots (cluster profile)', () => {
  let stateDir: string;
  let paths: StackPaths;
  const table = randomIdentifier('ha_rows');
  const publication = randomIdentifier('ha_pub');
  const failoverSlot = randomIdentifier('ha_failover');
  const plainSlot = randomIdentifier('ha_plain');

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'outbox-ha-'));
    paths = stackPaths(stateDir, defaultCacheDir());
    await upPair(paths, () => {}, options);
  });

  afterAll(async () => {
    if (paths) await downPair(paths, { clean: true }, () => {}, options);
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  });

  it('starts node a as primary with node b streaming as its synchronous standby, behind the proxy', async () => {
    const status = await pairStatus(paths, options);
    expect(status.nodes.map((n) => [n.name, n.role])).toEqual([['a', 'primary'], ['b', 'standby']]);
    expect(status.nodes[1]?.syncState).toBe('sync');
    expect(status.proxy).toMatchObject({ port: ports.proxy, target: 'a' });
    expect(status.proxy.pid).toBeGreaterThan(0);
    const [through] = await query<{ port: number; recovery: boolean; version: string }>(ports.proxy, "SELECT inet_server_port() AS port, pg_is_in_recovery() AS recovery, current_setting('server_version_num') AS version");
    expect(through).toEqual({ port: ports.a, recovery: false, version: expect.stringMatching(/^17/) });
    const settings = await query<{ name: string; setting: string }>(ports.b, "SELECT name, setting FROM pg_settings WHERE name IN ('sync_replication_slots', 'hot_standby_feedback', 'primary_slot_name', 'wal_level') ORDER BY name");
    expect(settings).toEqual([
      { name: 'hot_standby_feedback', setting: 'on' },
      { name: 'primary_slot_name', setting: 'node_b' },
      { name: 'sync_replication_slots', setting: 'on' },
      { name: 'wal_level', setting: 'logical' },
    ]);
    // A second upPair leaves the running pair alone.
    expect(await upPair(paths, () => {}, options)).toMatch(/primary node a .*standby node b/);
    expect((await pairStatus(paths, options)).nodes.map((n) => n.pid)).toEqual(status.nodes.map((n) => n.pid));
  });

  it('keeps a failover slot, and every acknowledged commit after its position, across a SIGKILL of the primary', async () => {
    await query(ports.proxy, `CREATE TABLE ${table} (id int PRIMARY KEY, note text)`);
    await query(ports.proxy, `CREATE PUBLICATION ${publication} FOR TABLE ${table}`);
    await query(ports.proxy, "SELECT pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)", [failoverSlot]);
    await query(ports.proxy, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [plainSlot]);
    for (let id = 1; id <= 5; id += 1) await query(ports.proxy, `INSERT INTO ${table} VALUES ($1, 'consumed')`, [id]);
    // Not consumed yet: the standby cannot persist its copy, so a failover now would lose the slot, and
    // waitFailoverReady (what the chaos run's failover fault waits on) names it; a plain slot is not waited for.
    expect(await waitFailoverReady(paths, [failoverSlot, plainSlot], 1_000, options)).toMatchObject({ missing: [failoverSlot] });
    // Consumed: rows 1-5 are behind the slot's confirmed position.
    const synced = await syncToStandby(ports.a, ports.b, failoverSlot);
    expect((await waitFailoverReady(paths, [failoverSlot], 5_000, options)).missing).toEqual([]);
    expect(synced).toMatchObject({ slot_type: 'logical', failover: true, synced: true, temporary: false, invalidation_reason: null });
    expect(await query(ports.b, 'SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [plainSlot])).toEqual([]);
    const standby = (await pairStatus(paths, options)).nodes.find((n) => n.name === 'b');
    expect(standby?.slots?.map((slot) => [slot.slot_name, slot.synced, slot.temporary])).toEqual([[failoverSlot, true, false]]);

    const writes = writer(table, 100);
    while (writes.acked.length < 30) await sleep(20);
    const report = await failover(paths, { kill: true }, () => {}, options);
    writes.stop();
    await writes.done;

    expect(report).toMatchObject({ from: 'a', to: 'b' });
    expect(report.primarySlots?.map((s) => s.slot_name)).toEqual(expect.arrayContaining([failoverSlot, plainSlot]));
    const before = report.standbySlots.find((s) => s.slot_name === failoverSlot);
    expect(before).toMatchObject({ synced: true, temporary: false, invalidation_reason: null, confirmed_flush_lsn: synced.confirmed_flush_lsn });
    expect(report.standbySlots.some((s) => s.slot_name === plainSlot)).toBe(false);
    expect(report.killToProxySwitchedMs).toBeGreaterThanOrEqual(report.killToPromotedMs);

    // Through the proxy, now node b: every acknowledged row is there (synchronous replication) ...
    const [through] = await query<{ port: number; recovery: boolean }>(ports.proxy, 'SELECT inet_server_port() AS port, pg_is_in_recovery() AS recovery');
    expect(through).toEqual({ port: ports.b, recovery: false });
    const rows = (await query<{ id: number }>(ports.proxy, `SELECT id FROM ${table} WHERE id >= 100`)).map((r) => r.id);
    expect(rows).toEqual(expect.arrayContaining(writes.acked));
    // ... and the failover slot decodes each of them, and none of the consumed rows 1-5: nothing lost, nothing replayed.
    const decoded = await peekIds(ports.b, failoverSlot, publication);
    expect(decoded).toEqual(expect.arrayContaining(writes.acked));
    expect(decoded.filter((id) => id < 100)).toEqual([]);
    // The slot made without failover = true is gone: the loss case the product must detect.
    expect(await query(ports.b, 'SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [plainSlot])).toEqual([]);
  });

  it('closes the connections the proxy held to the old primary', async () => {
    const client = await connect(ports.proxy);
    expect((await client.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0]?.port).toBe(ports.b);
    // A switch (here to the same node's peer and back) closes every open connection.
    const closed = new Promise((resolve) => client.once('end', resolve));
    const { switchProxy, haContext } = await import('../../scripts/stack/postgres-ha');
    const ctx = haContext(paths, options);
    await switchProxy(ctx, 'a');
    await closed;
    await expect(client.query('SELECT 1')).rejects.toThrow();
    await switchProxy(ctx, 'b');
    expect((await query<{ port: number }>(ports.proxy, 'SELECT inet_server_port() AS port'))[0]?.port).toBe(ports.b);
  });

  it('rebuilds the old primary as the synchronous standby, and fails over back with the slot', async () => {
    // Nothing consumes the slot on node b yet (syncToStandby below does), so its synced copy on node a may
    // stay temporary: a short wait, and the report says which slot it gave up on.
    const rebuilt = await rebuildStandby(paths, () => {}, { ...options, slotSyncWaitMs: 5_000 });
    expect(rebuilt).toMatchObject({ primary: 'b', standby: 'a' });
    for (const slot of rebuilt.slotsNotSynced ?? []) expect(slot).toBe(failoverSlot);
    expect(['rewind', 'basebackup']).toContain(rebuilt.method);
    const status = await pairStatus(paths, options);
    expect(status.nodes.map((n) => [n.name, n.role, n.syncState])).toEqual([['a', 'standby', 'sync'], ['b', 'primary', undefined]]);
    const waits = await query<{ names: string; slots: string }>(ports.b, "SELECT current_setting('synchronous_standby_names') AS names, current_setting('synchronized_standby_slots') AS slots");
    expect(waits).toEqual([{ names: 'node_a', slots: 'node_a' }]);

    // Consume everything so far on node b; the slot must reach node a before the next failover.
    await syncToStandby(ports.b, ports.a, failoverSlot);
    const writes = writer(table, 10_000);
    while (writes.acked.length < 30) await sleep(20);
    const report = await failover(paths, { kill: true }, () => {}, options);
    writes.stop();
    await writes.done;
    expect(report).toMatchObject({ from: 'b', to: 'a' });
    const decoded = await peekIds(portOf('a'), failoverSlot, publication);
    expect(decoded).toEqual(expect.arrayContaining(writes.acked));
    expect(decoded.filter((id) => id < 10_000)).toEqual([]);
    expect((await query<{ port: number }>(ports.proxy, 'SELECT inet_server_port() AS port'))[0]?.port).toBe(ports.a);
  });
});
