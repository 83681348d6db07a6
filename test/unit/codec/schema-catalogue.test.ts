/** src/codec/schema-catalogue.ts: schemas/<aggregate_type>/<EventType>.avsc → parsed types. */
import { join } from 'node:path';
import { createSchemaCatalogue, defaultSchemasDir } from '../../../src/codec';
import { PROJECT_ROOT } from '../../../scripts/stack/paths';
import { orderCreatedJson, tempSchemas } from './temp-schemas';
import { thrown } from '../../support/expect-error';


describe('schema catalogue', () => {
  it('loads the shipped order schemas from PROJECT_ROOT/schemas by default', () => {
    const catalogue = createSchemaCatalogue();
    expect(catalogue.dir).toBe(join(PROJECT_ROOT, 'schemas'));
    expect(defaultSchemasDir()).toBe(catalogue.dir);
    const names = catalogue.list().map((s) => `${s.aggregateType}/${s.eventType}`);
    expect(names).toEqual(expect.arrayContaining(['order/OrderCreated', 'order/OrderCancelled']));
    const cancelled = catalogue.get('order', 'OrderCancelled');
    expect(cancelled.fullName).toBe('dev.outboxrouter.order.OrderCancelled');
    expect(cancelled.type.isValid({ orderId: 'o-1', reason: 'changed mind', cancelledAt: new Date() })).toBe(true);
  });

  it('sends the JSON re-serialised, so reformatting a file changes nothing in the registry', () => {
    const json = orderCreatedJson();
    const a = createSchemaCatalogue({ schemasDir: tempSchemas({ 'order/OrderCreated': JSON.stringify(json) }) });
    const b = createSchemaCatalogue({ schemasDir: tempSchemas({ 'order/OrderCreated': JSON.stringify(json, null, 8) }) });
    expect(a.get('order', 'OrderCreated').text).toBe(b.get('order', 'OrderCreated').text);
    expect(a.get('order', 'OrderCreated').text).not.toMatch(/\n/);
  });

  it('names the aggregate, the event, the expected file and what exists for an unknown event type', () => {
    const catalogue = createSchemaCatalogue();
    const error = thrown(() => catalogue.get('order', 'OrderShipped'));
    expect(error.code).toBe('EVENT_TYPE_UNKNOWN');
    expect(error.retriable).toBe(false);
    expect(error.message).toContain('"OrderShipped"');
    expect(error.message).toContain('"order"');
    expect(error.message).toContain(join('order', 'OrderShipped.avsc'));
    expect(error.message).toContain('order/OrderCreated');
    expect(error.message).toContain('order/OrderCancelled');
    expect(catalogue.find('order', 'OrderShipped')).toBeUndefined();
  });

  it('says the folder does not exist when it does not', () => {
    const error = thrown(() => createSchemaCatalogue({ schemasDir: '/nonexistent/schemas' }).get('order', 'OrderCreated'));
    expect(error.code).toBe('EVENT_TYPE_UNKNOWN');
    expect(error.message).toContain('/nonexistent/schemas has no schemas (the folder does not exist)');
  });

  it.each([
    ['not JSON', '{ "type": "record", ', /OrderCreated\.avsc is unusable: it is not valid JSON/],
    ['an unknown Avro type', { type: 'record', name: 'OrderCreated', fields: [{ name: 'a', type: 'strin' }] }, /not a valid Avro schema \(undefined type name: strin\)/],
    ['not a record', { type: 'enum', name: 'OrderCreated', symbols: ['A'] }, /top-level type is enum; an event schema must be a record/],
    ['a record named unlike its file', { type: 'record', name: 'OrderPlaced', fields: [] }, /record is named "OrderPlaced" but the file name says "OrderCreated"/],
  ])('rejects a file that is %s with SCHEMA_INVALID naming the file', (_what, content, pattern) => {
    const dir = tempSchemas({ 'order/OrderCreated': content });
    const error = thrown(() => createSchemaCatalogue({ schemasDir: dir }).list());
    expect(error.code).toBe('SCHEMA_INVALID');
    expect(error.message).toMatch(pattern);
    expect(error.details.file).toBe(join(dir, 'order', 'OrderCreated.avsc'));
  });

  it('rejects an .avsc outside an aggregate folder instead of ignoring it', () => {
    const dir = tempSchemas({ OrderCreated: orderCreatedJson() });
    const error = thrown(() => createSchemaCatalogue({ schemasDir: dir }).list());
    expect(error.code).toBe('SCHEMA_INVALID');
    expect(error.message).toContain('must be in a folder named for its aggregate type');
  });
});
