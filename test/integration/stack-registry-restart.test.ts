import { createStack } from '../../scripts/stack';
import { REGISTRY_DATABASE } from '../../scripts/stack/settings';
import { AVRO_CONTENT_TYPE, createCodec } from '../../src/codec';
import { loadConfig } from '../../src/config';
import { randomName, withClient } from '../support/stack-env';

jest.setTimeout(180_000);

/**
 * The registry keeps its schemas in the stack's PostgreSQL (Apicurio's SQL storage). In memory, a
 * restart lost them: a writer without auto-registration failed with SCHEMA_NOT_REGISTERED, and a record
 * already on Kafka could not be decoded (SCHEMA_ID_UNKNOWN, then a DECODE_FAILED dead letter).
 */
describe('native stack: the registry remembers its schemas across a restart', () => {
  it('registers, is killed and started again, and still decodes the old record and encodes without registering', async () => {
    const config = loadConfig({ env: {} });
    const aggregateType = 'order';
    // A topic of its own, so the subject (`<topic>-<record name>`) is new to the registry.
    const prefix = randomName('reg').replace(/-/g, '');
    const topicFor = (t: string) => `${prefix}.outbox.event.${t}`;
    const payload = { orderId: 'o-1', customerId: 'c-1', currency: 'EUR', totalCents: 1999, lines: [{ sku: 'SKU-1', quantity: 1, priceCents: 1999 }], placedAt: new Date('2026-12-01T10:00:00Z') };
    const writer = createCodec({ registry: config.registry, autoRegister: true, topicFor });
    const old = await writer.encode(aggregateType, 'OrderCreated', payload, AVRO_CONTENT_TYPE);

    const tables = await withClient(REGISTRY_DATABASE, (c) => c.query<{ n: number }>("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"));
    expect(tables.rows[0]!.n).toBeGreaterThan(0);

    const stack = createStack();
    expect(await stack.stopService('registry', { kill: true })).toBe('killed');
    await stack.up();

    // Fresh codecs: nothing cached from before the restart.
    const reader = createCodec({ registry: config.registry, topicFor });
    expect(await reader.decode(old, AVRO_CONTENT_TYPE)).toEqual(payload);
    const strictWriter = createCodec({ registry: config.registry, autoRegister: false, topicFor });
    const fresh = await strictWriter.encode(aggregateType, 'OrderCreated', payload, AVRO_CONTENT_TYPE);
    expect(fresh.readInt32BE(1)).toBe(old.readInt32BE(1));
  });
});
