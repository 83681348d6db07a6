import { DEFAULT_TOPICS, defaultAggregateTypeOf, defaultDlqTopicFor } from '../../../src/router/topics';

describe('topic naming', () => {
  it('the default regex takes routed topics and no dead-letter topics', () => {
    expect(DEFAULT_TOPICS.test('outbox.event.order')).toBe(true);
    expect(DEFAULT_TOPICS.test('outbox.dlq.order')).toBe(false);
    expect(DEFAULT_TOPICS.test('outbox.event.')).toBe(false);
  });

  it('aggregate type: what follows the last outbox.event., prefixes allowed', () => {
    expect(defaultAggregateTypeOf('outbox.event.order')).toBe('order');
    expect(defaultAggregateTypeOf('staging.outbox.event.order.line')).toBe('order.line');
    expect(defaultAggregateTypeOf('other.topic.customer')).toBe('customer');
  });

  it('dead-letter topic keeps the prefix', () => {
    expect(defaultDlqTopicFor('outbox.event.order', 'order')).toBe('outbox.dlq.order');
    expect(defaultDlqTopicFor('t1.outbox.event.order', 'order')).toBe('t1.outbox.dlq.order');
    expect(defaultDlqTopicFor('other.customer', 'customer')).toBe('outbox.dlq.customer');
  });
});
