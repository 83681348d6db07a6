/** src/router/metrics.ts: the consumer-lag gauge keeps only the partitions this instance owns. */
import { createRouterMetrics } from '../../../src/router';

describe('router metrics', () => {
  it('a rebalance removes the lag of partitions no longer assigned, and keeps the others', async () => {
    const { registry, onEvent } = createRouterMetrics();
    onEvent('router.lag', { topic: 'outbox.event.order', partition: 0, lag: 40 });
    onEvent('router.lag', { topic: 'outbox.event.order', partition: 1, lag: 7 });
    onEvent('router.lag', { topic: 'outbox.event.invoice', partition: 0, lag: 3 });
    onEvent('router.group-join', { groupId: 'g', memberId: 'm', assignment: { 'outbox.event.order': [1] } });
    const text = await registry.metrics();
    expect(text).toContain('outbox_router_consumer_lag{topic="outbox.event.order",partition="1"} 7');
    expect(text).not.toContain('partition="0"');
    // reported again once it is assigned again
    onEvent('router.lag', { topic: 'outbox.event.order', partition: 0, lag: 2 });
    expect(await registry.metrics()).toContain('outbox_router_consumer_lag{topic="outbox.event.order",partition="0"} 2');
  });

  it('counts the records waiting on the registry by code, with the oldest wait\'s age, until each wait ends', async () => {
    const { registry, onEvent } = createRouterMetrics();
    const where = (offset: string) => ({ topic: 'outbox.event.order', partition: 0, offset, key: 'k' });
    onEvent('router.wait', { ...where('5'), code: 'SCHEMA_ID_UNKNOWN', waitedMs: 90_000 });
    onEvent('router.wait', { ...where('5'), code: 'SCHEMA_ID_UNKNOWN', waitedMs: 91_000 });
    onEvent('router.wait', { ...where('9'), code: 'REGISTRY_UNAVAILABLE', waitedMs: 0 });
    // A wait without waitedMs (the database, the DLQ producer) has no end event: counted elsewhere only.
    onEvent('router.wait', { ...where('12'), code: 'DB_UNAVAILABLE' });
    let text = await registry.metrics();
    expect(text).toContain('outbox_router_waiting_records{code="SCHEMA_ID_UNKNOWN"} 1');
    expect(text).toContain('outbox_router_waiting_records{code="REGISTRY_UNAVAILABLE"} 1');
    expect(text).not.toContain('outbox_router_waiting_records{code="DB_UNAVAILABLE"}');
    const oldest = Number(/outbox_router_waiting_oldest_seconds\{code="SCHEMA_ID_UNKNOWN"\} (\S+)/.exec(text)?.[1]);
    expect(oldest).toBeGreaterThanOrEqual(90);
    onEvent('router.wait-ended', { ...where('5'), code: 'SCHEMA_ID_UNKNOWN', outcome: 'dead-lettered' });
    text = await registry.metrics();
    expect(text).not.toContain('outbox_router_waiting_records{code="SCHEMA_ID_UNKNOWN"}');
    expect(text).not.toContain('outbox_router_waiting_oldest_seconds{code="SCHEMA_ID_UNKNOWN"}');
    expect(text).toContain('outbox_router_waiting_records{code="REGISTRY_UNAVAILABLE"} 1');
  });

  it('counts partition drops, their rows and the drops refused by reason, and keeps the last run\'s lock times', async () => {
    const { registry, onEvent } = createRouterMetrics();
    onEvent('router.inbox-partitions', { added: [], dropped: 2, rows: 1_500, kept: { parked: 1, 'too-new': 4 }, ms: 90, lockWaitMs: 1.5, heldMs: 40, dropMs: 2 });
    onEvent('router.inbox-partitions', { added: ['inbox_p20261210t000000'], dropped: 0, rows: 0, kept: { parked: 1, 'lock-timeout': 1 }, ms: 5, lockWaitMs: 200, heldMs: 0, dropMs: 0 });
    const text = await registry.metrics();
    expect(text).toContain('outbox_router_inbox_partitions_dropped_total 2');
    expect(text).toContain('outbox_router_inbox_partition_rows_dropped_total 1500');
    expect(text).toContain('outbox_router_inbox_partitions_kept_total{reason="parked"} 2');
    expect(text).toContain('outbox_router_inbox_partitions_kept_total{reason="lock-timeout"} 1');
    // A partition inside the window is not a refused drop.
    expect(text).not.toContain('reason="too-new"');
    expect(text).toContain('outbox_router_inbox_partition_last_lock_seconds{phase="wait"} 0.2');
    expect(text).toContain('outbox_router_inbox_partition_last_lock_seconds{phase="held"} 0');
  });
});
