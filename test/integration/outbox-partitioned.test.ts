/**
 * The partitioned outbox (outbox.cleanupMode = 'partition', migration 015) under a real Debezium
 * connector and the Outbox Event Router: with 5-second windows and the cleanup run every 500 ms
 * (runOutboxCleanup, the watchdog's path), events written across several windows, while partitions are
 * made ahead and dropped behind the slot, all reach their topic once each, with their keys and payloads;
 * a partition whose rows a paused connector has not read stays however many runs pass, and goes once the
 * connector resumes and confirms them. Every written id is on the topic: a drop loses nothing.
 */
import type { Pool } from 'pg';
import { runOutboxCleanup, type OutboxCleanupRun } from '../../src/cleanup';
import { createCodec, JSON_CONTENT_TYPE, topicForReplacement, type Codec } from '../../src/codec';
import type { OutboxConfig } from '../../src/config';
import { connectorStatus, deleteConnector, deployConnector, pauseConnector, resumeConnector } from '../../src/connector';
import { createPool } from '../../src/db';
import { createOutboxWriter, type OutboxWriter } from '../../src/producer';
import { provision } from '../../src/provision';
import { collect, type Received } from '../support/consume';
import { testConfig } from '../support/outbox-config';
import { freshDatabase, randomName, type FreshDatabase } from '../support/stack-env';
import { waitsUpTo } from '../support/until';

jest.setTimeout(150_000);
const until = waitsUpTo(60_000, 250);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const WINDOW_SECONDS = 5;

describe('partitioned outbox under Debezium: partitions made and dropped, every event routed once', () => {
  let db: FreshDatabase;
  let config: OutboxConfig;
  let pool: Pool;
  let codec: Codec;
  let writer: OutboxWriter;
  let topic: string;
  /** Every event written: id → its key and payload. */
  const written = new Map<string, { key: string; n: number }>();
  /** The partition each written id went to, read in its writing transaction (a partition may be dropped soon after). */
  const wentTo = new Map<string, string>();
  /** The background cleanup (the watchdog's call, on a short interval), its runs and any error. */
  const runs: OutboxCleanupRun[] = [];
  const cleanupErrors: unknown[] = [];
  let stopCleanup = false;
  let cleanupLoop: Promise<void> | undefined;

  beforeAll(async () => {
    db = await freshDatabase('partcdc');
    const prefix = randomName('pt').replace(/-/g, '');
    const topicReplacement = `${prefix}.outbox.event.\${routedByValue}`;
    config = testConfig(db.name, {
      outbox: { cleanupMode: 'partition', partitionSeconds: WINDOW_SECONDS, partitionsAhead: 2 },
      connector: { topicReplacement, topicPrefix: prefix },
    });
    topic = topicForReplacement(topicReplacement)('order');
    const report = await provision(config);
    expect(report.partitioned).toBe('converted');
    pool = createPool(config.database, { max: 6 });
    codec = createCodec({ registry: config.registry, topicFor: topicForReplacement(topicReplacement) });
    writer = createOutboxWriter({ outbox: config.outbox, codec, contentType: JSON_CONTENT_TYPE });
    expect((await deployConnector(config)).action).toBe('created');
    cleanupLoop = (async () => {
      while (!stopCleanup) {
        try {
          runs.push(await runOutboxCleanup(pool, { outbox: config.outbox, slotName: config.connector.slotName, batchSize: 1_000, maxBatches: 10 }));
        } catch (error) {
          cleanupErrors.push(error);
        }
        await sleep(500);
      }
    })();
  });

  afterAll(async () => {
    stopCleanup = true;
    await cleanupLoop;
    await deleteConnector(config, { dropSlot: true, force: true }).catch(() => {});
    await pool?.end();
    await db?.drop();
  });

  const partitions = async (): Promise<string[]> =>
    (await pool.query<{ name: string }>("SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'outbox'::regclass ORDER BY 1")).rows.map((r) => r.name);
  /** The partition each id is in now (absent: its partition was dropped). */
  const partitionOf = async (ids: string[]): Promise<Map<string, string>> =>
    new Map((await pool.query<{ id: string; part: string }>('SELECT id::text AS id, tableoid::regclass::text AS part FROM outbox WHERE id = ANY($1::uuid[])', [ids])).rows.map((r) => [r.id, r.part]));
  const exists = async (relation: string) => (await pool.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [relation])).rows[0]?.t !== null;
  const dropped = () => runs.reduce((sum, r) => sum + (r.partitions?.dropped ?? 0), 0);
  const created = () => runs.reduce((sum, r) => sum + (r.partitions?.created ?? 0), 0);

  /** One transaction of `count` events on `key`, written by the library's writer (UUIDv7 ids). */
  async function writeTx(key: string, count: number): Promise<string[]> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const base = written.size;
      const events = await writer.writeEvents(
        client,
        Array.from({ length: count }, (_, i) => ({ aggregateType: 'order', aggregateId: key, type: 'OrderNoted', payload: { n: base + i } })),
      );
      const { rows } = await client.query<{ id: string; part: string }>('SELECT id::text AS id, tableoid::regclass::text AS part FROM outbox WHERE id = ANY($1::uuid[])', [events.map((e) => e.id)]);
      await client.query('COMMIT');
      events.forEach((e, i) => written.set(e.id, { key, n: base + i }));
      for (const r of rows) wentTo.set(r.id, r.part);
      return events.map((e) => e.id);
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /** Reads the topic from the start until every written id is there, then checks each once, with its key and payload. */
  async function expectAllRoutedOnce(): Promise<Received[]> {
    const ids = [...written.keys()];
    const records = await collect([topic], (rs) => {
      const seen = new Set(rs.map((r) => r.headers.id));
      return ids.every((id) => seen.has(id));
    }, 60_000);
    // A little longer, so a late duplicate would be read too.
    const settled = await collect([topic], (rs) => rs.length >= records.length, 30_000);
    await sleep(1_500);
    const again = await collect([topic], (rs) => rs.length >= settled.length, 30_000);
    const count = new Map<string, number>();
    for (const r of again) count.set(r.headers.id ?? '', (count.get(r.headers.id ?? '') ?? 0) + 1);
    expect(ids.filter((id) => count.get(id) !== 1)).toEqual([]);
    expect(again.filter((r) => !written.has(r.headers.id ?? ''))).toEqual([]);
    for (const r of again) {
      const want = written.get(r.headers.id ?? '')!;
      expect(r.key).toBe(want.key);
      expect(r.headers.eventType).toBe('OrderNoted');
      expect(await codec.decode(r.value, r.headers.contentType as string)).toEqual({ n: want.n });
    }
    return again;
  }

  it('events written across several windows are all routed once while partitions are made ahead and dropped behind the slot', async () => {
    const before = await partitions();
    expect(before.length).toBeGreaterThanOrEqual(3); // the current window and 2 ahead, made by db:provision
    // Writes over more than three windows: one transaction of 2 events on one of 6 keys every 150 ms.
    const ids: string[] = [];
    const end = Date.now() + 3.2 * WINDOW_SECONDS * 1000;
    for (let i = 0; Date.now() < end; i++) {
      ids.push(...(await writeTx(`key-${i % 6}`, 2)));
      await sleep(150);
    }
    expect(ids.every((id) => wentTo.has(id))).toBe(true);
    const holding = [...new Set(ids.map((id) => wentTo.get(id)!))];
    expect(holding.length).toBeGreaterThanOrEqual(3);
    // Partitions were made while the writes ran (the windows ahead of the ones provision made).
    expect((await partitions()).filter((p) => !before.includes(p)).length).toBeGreaterThanOrEqual(2);
    expect(created()).toBeGreaterThanOrEqual(2);
    // The oldest windows' partitions go once the slot confirmed past their rows (and their window is a window past).
    await until('a partition holding routed rows dropped', async () => (await Promise.all(holding.map(exists))).filter((e) => !e).length, (n) => n >= 2, 60_000);
    expect(dropped()).toBeGreaterThanOrEqual(2);
    expect(cleanupErrors).toEqual([]);
    await expectAllRoutedOnce();
  });

  it('a partition holding rows the paused connector has not read is never dropped; after the resume it goes, and nothing is lost', async () => {
    await pauseConnector(config);
    await until('connector and task paused', async () => {
      const status = await connectorStatus(config);
      return status.state === 'PAUSED' && status.tasks.length > 0 && status.tasks.every((t) => t.state === 'PAUSED');
    });
    const unread = [...(await writeTx('paused-a', 3)), ...(await writeTx('paused-b', 2))];
    const parts = [...new Set(unread.map((id) => wentTo.get(id)!))];
    expect(parts.length).toBeGreaterThanOrEqual(1);
    const runsBefore = runs.length;
    const droppedBefore = dropped();
    // Long enough for their window to be a full window past: the partition is a candidate, kept only by the slot.
    await sleep(3 * WINDOW_SECONDS * 1000);
    expect(runs.length - runsBefore).toBeGreaterThanOrEqual(10);
    expect(runs.slice(runsBefore).some((r) => (r.partitions?.kept ?? 0) >= 1)).toBe(true);
    expect((await Promise.all(parts.map(exists))).every(Boolean)).toBe(true);
    expect((await partitionOf(unread)).size).toBe(unread.length);
    // Windows ahead kept being made meanwhile, so writers never ran out of partitions.
    const during = await writeTx('paused-c', 1);
    unread.push(...during);

    await resumeConnector(config);
    await until('the unread rows’ partitions dropped after the resume', async () => (await Promise.all(parts.map(exists))).filter(Boolean).length, (n) => n === 0, 60_000);
    expect(dropped()).toBeGreaterThan(droppedBefore);
    expect(cleanupErrors).toEqual([]);
    const records = await expectAllRoutedOnce();
    expect(records.filter((r) => unread.includes(r.headers.id ?? '')).length).toBe(unread.length);
  });
});
