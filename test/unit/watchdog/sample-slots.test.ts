/** src/watchdog/slot-query.ts sampleSlots: the one slot query, used by the watchdog, `outbox status` and the connector commands. */
import { readSlot } from '../../../src/connector/database';
import { sampleSlots, slotQuerySql } from '../../../src/watchdog';

function fakeClient(version: number, slots: Array<Record<string, unknown>>) {
  const asked: string[] = [];
  const client = {
    asked,
    query: async (text: string) => {
      asked.push(text);
      if (text.includes("current_setting('server_version_num')") && !text.includes('pg_replication_slots')) return { rows: [{ version_num: version }] };
      const base = { in_recovery: false, cur_lsn: '0/100', cur_pos: '256', sampled_at_ms: 1 };
      return { rows: slots.length ? slots.map((s) => ({ ...base, ...s })) : [base] };
    },
  };
  return client;
}

const slot = { slot_name: 'outbox_slot', slot_type: 'logical', plugin: 'pgoutput', database: 'app', temporary: false, active: true, active_pid: 7, restart_lsn: '0/10', confirmed_flush_lsn: '0/20', retained_bytes: '240', flush_lag_bytes: '224', wal_status: 'reserved', safe_wal_size: null };

describe('sampleSlots', () => {
  it.each([130000, 150004, 170005, 180000])('reads the server version once per client, then uses that version\'s SQL (%i)', async (version) => {
    const client = fakeClient(version, [slot]);
    await sampleSlots(client as never);
    const second = await sampleSlots(client as never);
    expect(client.asked).toHaveLength(3);
    expect(client.asked[1]).toBe(slotQuerySql(version));
    expect(client.asked[2]).toBe(slotQuerySql(version));
    expect(second.slots[0]).toMatchObject({ slotName: 'outbox_slot', retainedBytes: 240, flushLagBytes: 224, walStatus: 'reserved' });
  });

  it('PostgreSQL 13 gets NULLs for the columns it lacks', () => {
    expect(slotQuerySql(130000)).toContain('NULL::boolean AS two_phase');
    expect(slotQuerySql(170000)).toContain('s.failover AS failover');
  });

  it('the connector reads its slot through it, under its own field names', async () => {
    const client = fakeClient(150000, [slot, { ...slot, slot_name: 'other' }]);
    expect(await readSlot(client as never, 'outbox_slot')).toEqual({
      slotName: 'outbox_slot',
      database: 'app',
      plugin: 'pgoutput',
      active: true,
      activePid: 7,
      restartLsn: '0/10',
      confirmedFlushLsn: '0/20',
      walStatus: 'reserved',
      failover: null, // a PG15 server: no failover column
      retainedWalBytes: 240,
      confirmedLagBytes: 224,
    });
    expect(await readSlot(client as never, 'missing')).toBeUndefined();
    expect(client.asked.filter((q) => q.includes('pg_replication_slots'))).toEqual([slotQuerySql(150000), slotQuerySql(150000)]);
  });
});
