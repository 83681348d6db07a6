import { loadConfig } from '../../../src/config';
import { resolveSettings } from '../../../src/router/options';
import { topicSelection } from '../../../src/router/subscription';
import { assertNotDlqPattern, exactTopicsPattern, topicNames } from '../../../src/topics';

const handler = async () => {};

describe("the router's default topics", () => {
  it('are the routed topics of the aggregate types the handlers name, not every routed topic', () => {
    const selection = topicSelection({ handlers: { order: { OrderPlaced: handler }, payment: { PaymentTaken: handler } } }, topicNames());
    expect(selection.wanted).toEqual(['outbox.event.order', 'outbox.event.payment']);
    expect(selection.pattern.test('outbox.event.order')).toBe(true);
    expect(selection.pattern.test('outbox.event.customer')).toBe(false);
    expect(selection.pattern.test('outbox.event.orders')).toBe(false);
    expect(() => assertNotDlqPattern(selection.pattern)).not.toThrow();
  });

  it('follow connector.topicReplacement, and escape what the names hold', () => {
    const selection = topicSelection({ handlers: { 'order.v2': { Placed: handler }, 'a+b': { X: handler } } }, topicNames('staging.${routedByValue}.events'));
    expect(selection.wanted).toEqual(['staging.a+b.events', 'staging.order.v2.events']);
    expect(selection.pattern.test('staging.order.v2.events')).toBe(true);
    expect(selection.pattern.test('staging.orderXv2.events')).toBe(false);
    expect(selection.pattern.test('staging.aab.events')).toBe(false);
    expect(selection.pattern.test('staging.a+b.events')).toBe(true);
  });

  it("of a router reading several outboxes are each template's topics of the handlers' types", () => {
    const selection = topicSelection({ handlers: { order: { Placed: handler } } }, [topicNames('shop.event.${routedByValue}'), topicNames('billing.${routedByValue}')]);
    expect(selection.wanted).toEqual(['billing.order', 'shop.event.order']);
    expect(selection.pattern.test('billing.order')).toBe(true);
    expect(selection.pattern.test('billing.invoice')).toBe(false);
  });

  it('accept topicReplacements as a router option (createRouter validates its options by a schema of settings)', () => {
    const config = loadConfig({ env: {} });
    expect(() => resolveSettings({ config, handlers: { order: { Placed: handler } }, topicReplacements: ['shop.event.${routedByValue}', 'billing.${routedByValue}'] })).not.toThrow();
  });

  it('give way to an explicit pattern, which has no exact names', () => {
    const topics = /^outbox\.event\..+$/;
    expect(topicSelection({ topics, handlers: { order: { OrderPlaced: handler } } }, topicNames())).toEqual({ pattern: topics });
  });

  it('an exact pattern of no names matches nothing', () => {
    expect(exactTopicsPattern([]).test('')).toBe(false);
    expect(exactTopicsPattern([]).test('outbox.event.order')).toBe(false);
    expect(exactTopicsPattern(['b', 'a', 'b']).source).toBe('^(?:a|b)$');
  });
});
