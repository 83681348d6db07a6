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
});
