/** src/codec/subject-naming.ts: TopicRecordNameStrategy, `<topic>-<record full name>`. */
import { createCodec, defaultTopicFor, topicForReplacement, topicRecordSubject } from '../../../src/codec';
import { fakeRegistry } from './fake-registry';

describe('subject naming', () => {
  it('defaults the topic to outbox.event.<aggregate_type>, like the connector', () => {
    expect(defaultTopicFor('order')).toBe('outbox.event.order');
    expect(topicForReplacement('outbox.event.${routedByValue}')('order')).toBe('outbox.event.order');
    expect(topicForReplacement('acme.${routedByValue}.events')('invoice')).toBe('acme.invoice.events');
  });

  it('joins topic and record full name with a dash', () => {
    expect(topicRecordSubject('outbox.event.order', 'dev.outboxrouter.order.OrderCreated')).toBe('outbox.event.order-dev.outboxrouter.order.OrderCreated');
  });

  it('gives each event type of one aggregate its own subject (subjectFor)', () => {
    const codec = createCodec({ registry: { url: 'http://unused' }, connection: fakeRegistry() });
    expect(codec.subjectFor('order', 'OrderCreated')).toBe('outbox.event.order-dev.outboxrouter.order.OrderCreated');
    expect(codec.subjectFor('order', 'OrderCancelled')).toBe('outbox.event.order-dev.outboxrouter.order.OrderCancelled');
    const custom = createCodec({ registry: { url: 'http://unused' }, connection: fakeRegistry(), topicFor: (a) => `t1.${a}` });
    expect(custom.subjectFor('order', 'OrderCreated')).toBe('t1.order-dev.outboxrouter.order.OrderCreated');
    expect(() => codec.subjectFor('order', 'Nope')).toThrow(expect.objectContaining({ code: 'EVENT_TYPE_UNKNOWN' }));
  });
});
