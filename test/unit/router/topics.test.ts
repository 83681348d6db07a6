import { assertNotDlqPattern, topicNames } from '../../../src/topics';

// The default replacement's names, as the router derives them when connector.topicReplacement is not set.
const { pattern: DEFAULT_TOPICS, aggregateTypeOf: defaultAggregateTypeOf, dlqFor: defaultDlqTopicFor } = topicNames();

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

describe('assertNotDlqPattern', () => {
  const refusal = (pattern: RegExp, candidates?: string[]): string | undefined => {
    try {
      assertNotDlqPattern(pattern, candidates);
      return undefined;
    } catch (error) {
      return `${(error as { code?: string }).code}: ${(error as Error).message}`;
    }
  };

  it('refuses a pattern matching dead-letter topics, naming the pattern and the fix', () => {
    expect(refusal(/.*/)).toMatch(/^TOPIC_PATTERN_INVALID: The topics pattern \/\.\*\/ \(--topics\) matches dead-letter topics \(outbox\.dlq\.x.*\^outbox\\\.event\\\.\.\+\$ or .*by default the router reads the routed topics of its handlers' aggregate types/s);
    expect(refusal(/^outbox\..+/)).toMatch(/^TOPIC_PATTERN_INVALID: .*outbox\.dlq\.x/s);
  });

  it('accepts the default and narrow patterns', () => {
    expect(refusal(DEFAULT_TOPICS)).toBeUndefined();
    expect(refusal(/^outbox\.event\.(order|payment)$/)).toBeUndefined();
  });

  it('checks the dead-letter topics that exist or that the routed topics map to (a prefix the samples miss)', () => {
    expect(refusal(/^staging\.outbox\./)).toBeUndefined();
    expect(refusal(/^staging\.outbox\./, ['staging.outbox.dlq.order'])).toMatch(/matches dead-letter topics \(staging\.outbox\.dlq\.order\)/);
    expect(refusal(DEFAULT_TOPICS, ['staging.outbox.dlq.order', 'outbox.dlq.payment'])).toBeUndefined();
  });
});
