/** src/topics: every name derived from connector.topicReplacement, so changing it changes them all. */
import { target } from '../../../src/cli/dlq-commands';
import { loadConfig } from '../../../src/config';
import { findCompactedTopics } from '../../../src/connector/topic-guard';
import { topicForReplacement } from '../../../src/codec';
import { dlqTopicPattern, routedTopicPattern } from '../../../src/status';
import { assertNotDlqPattern, topicNames } from '../../../src/topics';

describe('topicNames', () => {
  it('the default: outbox.event.<type>, dead letters in outbox.dlq.<type>', () => {
    const names = topicNames();
    expect(names.routed('order')).toBe('outbox.event.order');
    expect(names.pattern.source).toBe('^outbox\\.event\\..+$');
    expect(names.dlqPattern.source).toBe('^outbox\\.dlq\\..+$');
    expect(names.aggregateTypeOf('outbox.event.order.line')).toBe('order.line');
    expect(names.dlqFor('outbox.event.order')).toBe('outbox.dlq.order');
    expect(names.aggregateTypeOfDlq('outbox.dlq.order')).toBe('order');
    expect(names.isDlq('outbox.dlq.order')).toBe(true);
    expect(names.isDlq('outbox.event.order')).toBe(false);
  });

  it.each([
    ['staging.outbox.event.${routedByValue}', 'staging.outbox.event.order', 'staging.outbox.dlq.order'],
    ['app.events.${routedByValue}', 'app.events.order', 'outbox.dlq.order'],
    ['pre.outbox.event.${routedByValue}.v2', 'pre.outbox.event.order.v2', 'pre.outbox.dlq.order.v2'],
  ])('changing the replacement to %s changes the routed topic, pattern, aggregate type and DLQ topic together', (replacement, routed, dlq) => {
    const names = topicNames(replacement);
    expect(names.routed('order')).toBe(routed);
    expect(names.pattern.test(routed)).toBe(true);
    expect(names.pattern.test('outbox.event.order')).toBe(routed === 'outbox.event.order');
    expect(names.pattern.test(dlq)).toBe(false);
    expect(names.aggregateTypeOf(routed)).toBe('order');
    expect(names.dlqFor(routed)).toBe(dlq);
    expect(names.dlqPattern.test(dlq)).toBe(true);
    expect(names.dlqPattern.test(routed)).toBe(false);
    expect(names.aggregateTypeOfDlq(dlq)).toBe('order');
    expect(() => assertNotDlqPattern(names.pattern, [dlq])).not.toThrow();
  });

  it('a template with nothing around ${routedByValue} still keeps dead letters out of its pattern', () => {
    const names = topicNames('${routedByValue}');
    expect(names.pattern.test('order')).toBe(true);
    expect(names.pattern.test('outbox.dlq.order')).toBe(false);
    expect(names.dlqFor('order')).toBe('outbox.dlq.order');
  });

  it('topics outside the template (a prefixed test deployment on the default template) keep their prefix', () => {
    const names = topicNames();
    expect(names.aggregateTypeOf('t1.outbox.event.order')).toBe('order');
    expect(names.dlqFor('t1.outbox.event.order')).toBe('t1.outbox.dlq.order');
    expect(names.dlqFor('other.customer', 'customer')).toBe('outbox.dlq.customer');
  });
});

describe('one replacement, every user', () => {
  const replacement = 'app.event.${routedByValue}';
  const config = loadConfig({ env: {}, overrides: { connector: { topicReplacement: replacement } } });

  it('the config carries the replacement', () => {
    expect(config.connector.topicReplacement).toBe(replacement);
  });

  it('codec subjects, status patterns and the DLQ commands agree with topicNames', () => {
    const names = topicNames(replacement);
    expect(topicForReplacement(replacement)('order')).toBe(names.routed('order'));
    expect(routedTopicPattern(config).source).toBe(names.pattern.source);
    expect(dlqTopicPattern(config).source).toBe(names.dlqPattern.source);
    // Before: the DLQ commands read app.dlq.order while the router wrote outbox.dlq.order.
    expect(target({ aggregateType: 'order' }, config)).toEqual({ dlqTopic: 'outbox.dlq.order', aggregateType: 'order' });
    expect(target({ topic: 'outbox.dlq.order' }, config)).toEqual({ dlqTopic: 'outbox.dlq.order', aggregateType: 'order' });
  });

  it('the connector topic guard looks at the same event and dead-letter topics', async () => {
    const admin = {
      listTopics: async () => ['app.event.order', 'outbox.dlq.order', 'outbox.event.order'],
      describeConfigs: async ({ resources }: { resources: Array<{ name: string }> }) => ({
        throttleTime: 0,
        resources: resources.map((r) => ({ resourceName: r.name, resourceType: 2, errorCode: 0, errorMessage: null, configEntries: [{ configName: 'cleanup.policy', configValue: 'compact' }] })),
      }),
    };
    const found = await findCompactedTopics(admin as never, replacement);
    expect(found.map((t) => [t.topic, t.kind])).toEqual([
      ['app.event.order', 'event'],
      ['outbox.dlq.order', 'dead-letter'],
    ]);
  });
});
