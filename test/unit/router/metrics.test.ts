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
});
