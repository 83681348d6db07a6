/** src/codec/schema-admin.ts: registerSchemas / checkSchemas over the in-memory registry. */
import { checkSchemas, formatIncompatible, registerSchemas } from '../../../src/codec';
import { OutboxError } from '../../../src/errors';
import { fakeRegistry } from './fake-registry';
import { orderCreatedJson, tempSchemas } from './temp-schemas';

const config = { registry: { url: 'http://unused' }, connector: { topicReplacement: 'shop.${routedByValue}' } };
const created = 'shop.order-dev.outboxrouter.order.OrderCreated';
const cancelled = 'shop.order-dev.outboxrouter.order.OrderCancelled';

describe('registerSchemas', () => {
  it('registers every local schema under the subject from the connector topic, then is idempotent', async () => {
    const connection = fakeRegistry(7);
    const first = await registerSchemas(config, { connection });
    expect(first.map((r) => [r.subject, r.status])).toEqual([
      [cancelled, 'registered'],
      [created, 'registered'],
    ]);
    const again = await registerSchemas(config, { connection });
    expect(again.map((r) => r.status)).toEqual(['unchanged', 'unchanged']);
    expect(again.map((r) => r.id)).toEqual(first.map((r) => r.id));
  });

  it('registers what it can and throws SCHEMA_INCOMPATIBLE for the rest, naming the fields', async () => {
    const connection = fakeRegistry();
    const json = orderCreatedJson();
    await registerSchemas(config, { connection, schemasDir: tempSchemas({ 'order/OrderCreated': json }) });
    const incompatible = { ...json, fields: [...json.fields, { name: 'channel', type: 'string' }] };
    const dir = tempSchemas({ 'order/OrderCreated': incompatible, 'order/OrderCancelled': { type: 'record', name: 'OrderCancelled', namespace: 'dev.outboxrouter.order', fields: [] } });
    connection.register = async (subject) => {
      if (subject === created) throw new OutboxError('SCHEMA_INCOMPATIBLE', 'refused');
      return 99;
    };
    connection.compatible = false;
    const error = await registerSchemas(config, { connection, schemasDir: dir }).catch((e: OutboxError) => e);
    expect(error).toBeInstanceOf(OutboxError);
    expect((error as OutboxError).code).toBe('SCHEMA_INCOMPATIBLE');
    expect((error as OutboxError).message).toContain(`${created} (`);
    expect((error as OutboxError).message).toContain('OrderCreated.channel: added without a default');
    expect((error as OutboxError).details.registered).toEqual([expect.objectContaining({ subject: cancelled, id: 99 })]);
  });
});

describe('checkSchemas', () => {
  it('reports new, unchanged, compatible and incompatible subjects', async () => {
    const connection = fakeRegistry();
    const json = orderCreatedJson();
    expect((await checkSchemas(config, { connection })).results.map((r) => r.status)).toEqual(['new', 'new']);
    await registerSchemas(config, { connection });
    const unchanged = await checkSchemas(config, { connection });
    expect(unchanged.ok).toBe(true);
    expect(unchanged.results.map((r) => r.status)).toEqual(['unchanged', 'unchanged']);

    const compatibleDir = tempSchemas({ 'order/OrderCreated': { ...json, fields: [...json.fields, { name: 'note', type: ['null', 'string'], default: null }] } });
    const compatible = await checkSchemas(config, { connection, schemasDir: compatibleDir });
    expect(compatible.results).toEqual([expect.objectContaining({ subject: created, status: 'compatible', level: 'BACKWARD', registeredVersion: 1, registryCompatible: true, issues: [] })]);

    connection.compatible = false;
    const badDir = tempSchemas({ 'order/OrderCreated': { ...json, fields: [...json.fields, { name: 'channel', type: 'string' }] } });
    const bad = await checkSchemas(config, { connection, schemasDir: badDir });
    expect(bad.ok).toBe(false);
    expect(bad.results[0]?.status).toBe('incompatible');
    expect(bad.results[0]?.issues.map((i) => `${i.path}: ${i.problem}`)).toEqual(['OrderCreated.channel: added without a default']);
    expect(formatIncompatible(bad.results)).toContain(`${created} (${badDir}/order/OrderCreated.avsc, BACKWARD against version 1)`);
  });

  it('still reports incompatible when only the registry objects, and says so', async () => {
    const connection = fakeRegistry();
    await registerSchemas(config, { connection });
    const json = orderCreatedJson();
    connection.compatible = false;
    const report = await checkSchemas(config, { connection, schemasDir: tempSchemas({ 'order/OrderCreated': { ...json, doc: 'changed' } }) });
    expect(report.results[0]?.status).toBe('incompatible');
    expect(report.results[0]?.issues[0]?.problem).toContain('the registry (BACKWARD) reports it incompatible with version 1, but the field-level analysis found no cause');
  });

  it('follows the subject level: FORWARD flags a removed field, NONE flags nothing', async () => {
    const connection = fakeRegistry();
    await registerSchemas(config, { connection });
    const json = orderCreatedJson();
    const dir = tempSchemas({ 'order/OrderCreated': { ...json, fields: json.fields.filter((f) => f.name !== 'currency') } });
    connection.level = 'FORWARD';
    const forward = await checkSchemas(config, { connection, schemasDir: dir });
    expect(forward.results[0]?.issues.map((i) => i.path)).toEqual(['OrderCreated.currency']);
    connection.level = 'NONE';
    expect((await checkSchemas(config, { connection, schemasDir: dir })).results[0]?.status).toBe('compatible');
  });

  it('checks a *_TRANSITIVE level against every registered version, the others against the latest only', async () => {
    const connection = fakeRegistry();
    const json = orderCreatedJson();
    // Version 1 has no `channel`, version 2 adds it as a string, version 3 drops it again.
    const versions = [json, { ...json, fields: [...json.fields, { name: 'channel', type: 'string', default: 'web' }] }, { ...json, doc: 'v3' }];
    for (const v of versions) await registerSchemas(config, { connection, schemasDir: tempSchemas({ 'order/OrderCreated': v }) });
    expect(connection.subjects.get(created)).toHaveLength(3);

    // Adding `channel` as an int is fine against version 3 alone, not against version 2's string.
    const proposal = tempSchemas({ 'order/OrderCreated': { ...json, fields: [...json.fields, { name: 'channel', type: 'int', default: 0 }] } });
    connection.level = 'FORWARD';
    expect((await checkSchemas(config, { connection, schemasDir: proposal })).results[0]?.status).toBe('compatible');
    connection.level = 'FORWARD_TRANSITIVE';
    const transitive = (await checkSchemas(config, { connection, schemasDir: proposal })).results[0];
    expect(transitive?.status).toBe('incompatible');
    expect(transitive?.issues.map((i) => `${i.path}: ${i.problem}`)).toEqual([expect.stringMatching(/^OrderCreated\.channel: .*\(against version 2\)$/)]);
    connection.level = 'BACKWARD_TRANSITIVE';
    expect((await checkSchemas(config, { connection, schemasDir: proposal })).results[0]?.issues.map((i) => i.path)).toEqual(['OrderCreated.channel']);
    connection.level = 'BACKWARD';
    expect((await checkSchemas(config, { connection, schemasDir: proposal })).results[0]?.status).toBe('compatible');
  });
});
