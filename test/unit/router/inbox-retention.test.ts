import { isOutboxError } from '../../../src/errors';
import { createRouterMetrics } from '../../../src/router';
import type { Admin } from 'kafkajs';
import { assertInboxRetention, pruneBlock, pruneInboxSql, safeInboxRetention, topicRetentions } from '../../../src/router/inbox-retention';
import { createPruneGuard } from '../../../src/router/prune-guard';
import { runCleanup } from '../../../src/db';

const DAY = 86_400_000;
const topic = (name: string, retentionMs: number | null, segmentMs: number | null = 7 * DAY) => ({ topic: name, retentionMs, segmentMs });

describe('the inbox retention window', () => {
  it('is safe from the longest-lived routed topic (retention.ms + segment.ms) plus the DLQ replay horizon', () => {
    const check = safeInboxRetention([topic('outbox.event.order', 7 * DAY), topic('outbox.event.payment', 3 * DAY, DAY), topic('outbox.event.gone', null)], 2 * DAY);
    expect(check).toEqual({ minimumMs: 16 * DAY, topic: 'outbox.event.order', unknown: ['outbox.event.gone'] });
    expect(safeInboxRetention([], 2 * DAY).minimumMs).toBe(2 * DAY);
    expect(safeInboxRetention([topic('outbox.event.order', -1)], 0).minimumMs).toBe(Infinity);
  });

  it('refuses a window below the safe minimum with INBOX_RETENTION_TOO_SHORT, unless allowed or 0 (never prune)', () => {
    const topics = [topic('outbox.event.order', 7 * DAY)];
    let error: unknown;
    try {
      assertInboxRetention(14 * DAY, DAY, topics, false);
    } catch (e) {
      error = e;
    }
    expect(isOutboxError(error) && error.code).toBe('INBOX_RETENTION_TOO_SHORT');
    expect((error as Error).message).toContain('15 d');
    expect((error as Error).message).toContain('outbox.event.order');
    expect(() => assertInboxRetention(15 * DAY, DAY, topics, false)).not.toThrow();
    expect(() => assertInboxRetention(DAY, DAY, topics, true)).not.toThrow();
    expect(() => assertInboxRetention(0, DAY, topics, false)).not.toThrow();
    expect(() => assertInboxRetention(365 * DAY, 0, [topic('outbox.event.order', -1)], false)).toThrow(/forever/);
  });

  it('has no finite window for a compacted topic, one kept forever or one whose settings are unknown: the reasons and topics say which', () => {
    const compacted = { ...topic('outbox.event.customer', DAY, DAY), compacted: true };
    expect(safeInboxRetention([compacted], 0).minimumMs).toBe(Infinity);
    const block = pruneBlock(365 * DAY, DAY, [compacted, topic('outbox.event.order', -1), topic('outbox.event.gone', null), topic('outbox.event.ok', DAY)], false, 'TOPIC_AUTHORIZATION_FAILED');
    expect(block?.reasons).toEqual(['retention-unknown', 'compacted', 'retention-infinite']);
    expect(block?.topics).toEqual(['outbox.event.customer', 'outbox.event.gone', 'outbox.event.order']);
    expect(block?.message).toMatch(/settings of outbox\.event\.gone could not be read \(TOPIC_AUTHORIZATION_FAILED\)/);
    expect(block?.message).toContain('outbox.event.customer is compacted');
    expect(block?.minimumMs).toBe(-1);
    // Unknown alone blocks too, whatever the window; allowShort and 0 never block.
    expect(pruneBlock(365 * DAY, DAY, [topic('outbox.event.gone', null)], false)?.reasons).toEqual(['retention-unknown']);
    expect(pruneBlock(365 * DAY, DAY, [compacted], true)).toBeUndefined();
    expect(pruneBlock(0, DAY, [compacted], false)).toBeUndefined();
    expect(pruneBlock(9 * DAY, DAY, [topic('outbox.event.order', 7 * DAY, DAY)], false)).toBeUndefined();
    expect(pruneBlock(8 * DAY, DAY, [topic('outbox.event.order', 7 * DAY, DAY)], false)?.reasons).toEqual(['retention-too-short']);
    expect(() => assertInboxRetention(365 * DAY, DAY, [compacted], false)).toThrow(/compacted/);
  });

  it('reads retention.ms, segment.ms and cleanup.policy; a refused request or an undescribable topic is unknown, never an error', async () => {
    const entries = (policy: string) => [
      { configName: 'retention.ms', configValue: String(DAY) },
      { configName: 'segment.ms', configValue: String(DAY) },
      { configName: 'cleanup.policy', configValue: policy },
    ];
    const admin = {
      describeConfigs: async () => ({
        resources: [
          { resourceName: 'a', errorCode: 0, configEntries: entries('delete') },
          { resourceName: 'b', errorCode: 0, configEntries: entries('compact,delete') },
          { resourceName: 'c', errorCode: 29, errorMessage: 'Topic authorization failed', configEntries: [] },
        ],
      }),
    } as unknown as Admin;
    expect(await topicRetentions(admin, ['a', 'b', 'c'])).toEqual({
      retentions: [
        { topic: 'a', retentionMs: DAY, segmentMs: DAY, compacted: false },
        { topic: 'b', retentionMs: DAY, segmentMs: DAY, compacted: true },
        { topic: 'c', retentionMs: null, segmentMs: null },
      ],
      error: 'c: Topic authorization failed',
    });
    const refused = { describeConfigs: async () => Promise.reject(new Error('Cluster authorization failed')) } as unknown as Admin;
    expect(await topicRetentions(refused, ['a'])).toEqual({ retentions: [{ topic: 'a', retentionMs: null, segmentMs: null }], error: 'Cluster authorization failed' });
  });

  it("the router's guard checks every topic it was given, blocks while one is unsafe and says when it resumes", async () => {
    let fail = true;
    const admin = {
      describeConfigs: async ({ resources }: { resources: Array<{ name: string }> }) => {
        if (fail) throw new Error('DescribeConfigs refused');
        return { resources: resources.map((r) => ({ resourceName: r.name, errorCode: 0, configEntries: [{ configName: 'retention.ms', configValue: String(DAY) }, { configName: 'segment.ms', configValue: '0' }, { configName: 'cleanup.policy', configValue: 'delete' }] })) };
      },
    } as unknown as Admin;
    const events: Array<[string, Record<string, unknown>]> = [];
    const guard = createPruneGuard(() => admin, { inboxRetentionMs: 10 * DAY, dlqReplayHorizonMs: DAY, allowShortInboxRetention: false }, (name, data) => void events.push([name, data]));
    expect(await guard.watch([])).toBeUndefined(); // no topic: nothing to read
    expect(await guard.watch(['outbox.event.order'])).toMatchObject({ reasons: ['retention-unknown'], topics: ['outbox.event.order'] });
    expect(guard.blocked()?.message).toContain('DescribeConfigs refused');
    fail = false;
    expect(await guard.check()).toBeUndefined();
    expect(guard.blocked()).toBeUndefined();
    expect(guard.minimumMs()).toBe(2 * DAY);
    expect(events.map(([name]) => name)).toEqual(['router.inbox-prune-blocked', 'router.inbox-prune-resumed']);
    expect(events[0]?.[1]).toMatchObject({ code: 'INBOX_RETENTION_TOO_SHORT', reasons: ['retention-unknown'] });
  });

  it('a watched topic that was deleted is no longer checked (kafkajs fails the whole DescribeConfigs on one missing topic)', async () => {
    const topics = new Set(['outbox.event.order', 'outbox.event.retired']);
    const admin = {
      listTopics: async () => [...topics],
      describeConfigs: async ({ resources }: { resources: Array<{ name: string }> }) => {
        const missing = resources.find((r) => !topics.has(r.name));
        if (missing) throw new Error(`This server does not host this topic-partition: ${missing.name}`);
        return { resources: resources.map((r) => ({ resourceName: r.name, errorCode: 0, configEntries: [{ configName: 'retention.ms', configValue: String(DAY) }, { configName: 'segment.ms', configValue: '0' }, { configName: 'cleanup.policy', configValue: 'delete' }] })) };
      },
    } as unknown as Admin;
    const guard = createPruneGuard(() => admin, { inboxRetentionMs: 10 * DAY, dlqReplayHorizonMs: DAY, allowShortInboxRetention: false }, () => {});
    expect(await guard.watch([...topics])).toBeUndefined();
    topics.delete('outbox.event.retired');
    expect(await guard.check()).toBeUndefined();
    expect(guard.blocked()).toBeUndefined();
  });

  it('prunes by primary key, oldest first, per consumer, skipping rows whose event is parked, without row locks the router role may not take', () => {
    const sql = pruneInboxSql('"public"."inbox"', '"public"."inbox_parked"');
    expect(sql).toMatch(/^DELETE FROM "public"\."inbox" WHERE consumer = \$1 AND message_id IN \(/);
    // Two equality anti-joins (hashable), never one OR (a nested loop over every parked event per row).
    expect(sql).toContain('NOT EXISTS (SELECT 1 FROM "public"."inbox_parked" p WHERE p.consumer = $1 AND p.event_id = i.message_id::text)');
    expect(sql).toContain('NOT EXISTS (SELECT 1 FROM "public"."inbox_parked" p WHERE p.consumer = $1 AND lower(p.event_id) = i.message_id::text)');
    expect(sql).not.toMatch(/ IN \(p\.event_id/);
    expect(sql).toMatch(/ORDER BY i\.processed_at LIMIT \$3\)$/);
    expect(sql).not.toContain('FOR UPDATE');
  });

  it('deletes in batches until one comes back short', async () => {
    const sizes = [5, 5, 2];
    const result = await runCleanup(async (limit) => Math.min(limit, sizes.shift() ?? 0), { batchSize: 5 });
    expect(result).toEqual({ deleted: 12, batches: 3 });
  });
});

describe('router metrics for the inbox and parked keys', () => {
  it('count pruned rows and show the parked gauges, dropping aggregate types no longer parked', async () => {
    const { registry, onEvent } = createRouterMetrics();
    onEvent('router.inbox-pruned', { deleted: 7, batches: 2, ms: 1500, rows: 42 });
    onEvent('router.inbox-pruned', { deleted: 3, batches: 1, ms: 10, rows: 39 });
    onEvent('router.parked', { types: [{ aggregateType: 'order', keys: 2, events: 9, oldestSeconds: 120 }, { aggregateType: 'payment', keys: 1, events: 1, oldestSeconds: 5 }] });
    onEvent('router.parked', { types: [{ aggregateType: 'order', keys: 1, events: 4, oldestSeconds: 150 }] });
    const text = await registry.metrics();
    expect(text).toContain('outbox_router_inbox_pruned_total 10');
    expect(text).toContain('outbox_router_inbox_rows_estimate 39');
    expect(text).toContain('outbox_router_inbox_last_prune_duration_seconds 0.01');
    expect(text).toMatch(/outbox_router_inbox_last_prune_timestamp_seconds \d+/);
    expect(text).toContain('outbox_router_parked_keys{aggregate_type="order"} 1');
    expect(text).toContain('outbox_router_parked_events{aggregate_type="order"} 4');
    expect(text).toContain('outbox_router_parked_oldest_seconds{aggregate_type="order"} 150');
    expect(text).not.toContain('aggregate_type="payment"');
  });

  it('show why the prune is blocked, one series per reason, all 0 once it resumes', async () => {
    const { registry, onEvent } = createRouterMetrics();
    expect(await registry.metrics()).toContain('outbox_router_inbox_prune_blocked{reason="compacted"} 0');
    onEvent('router.inbox-prune-blocked', { reasons: ['compacted', 'retention-unknown'], topics: ['outbox.event.order'] });
    let text = await registry.metrics();
    expect(text).toContain('outbox_router_inbox_prune_blocked{reason="compacted"} 1');
    expect(text).toContain('outbox_router_inbox_prune_blocked{reason="retention-unknown"} 1');
    expect(text).toContain('outbox_router_inbox_prune_blocked{reason="retention-too-short"} 0');
    onEvent('router.inbox-prune-resumed', {});
    text = await registry.metrics();
    expect(text).not.toMatch(/outbox_router_inbox_prune_blocked\{[^}]*\} 1/);
  });
});
