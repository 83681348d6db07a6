import { isOutboxError } from '../../../src/errors';
import { createRouterMetrics } from '../../../src/router';
import { assertInboxRetention, pruneInboxSql, safeInboxRetention } from '../../../src/router/inbox-retention';
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

  it('prunes by primary key, oldest first, per consumer, skipping rows whose event is parked, without row locks the router role may not take', () => {
    const sql = pruneInboxSql('"public"."inbox"', '"public"."inbox_parked"');
    expect(sql).toMatch(/^DELETE FROM "public"\."inbox" WHERE consumer = \$1 AND message_id IN \(/);
    expect(sql).toContain('NOT EXISTS (SELECT 1 FROM "public"."inbox_parked" p WHERE p.consumer = $1 AND lower(p.event_id) = i.message_id::text)');
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
});
