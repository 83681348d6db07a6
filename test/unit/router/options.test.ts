import { loadConfig } from '../../../src/config';
import { isOutboxError } from '../../../src/errors';
import { consumerName, resolveSettings } from '../../../src/router/options';

const config = loadConfig({ env: {} });
const handlers = { order: { OrderCreated: async () => {} } };

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return isOutboxError(error) ? `${error.code}: ${error.message}` : 'not an OutboxError';
  }
  return undefined;
}

describe('resolveSettings', () => {
  it('fills defaults: group = consumer, a connection per partition lane plus two, an idle fetch of a second', () => {
    expect(resolveSettings({ config, handlers })).toEqual({
      consumer: 'outbox-router',
      groupId: 'outbox-router',
      allowGroupIdMismatch: false,
      maxAttempts: 5,
      backoff: { initialDelayMs: 200, maxDelayMs: 30_000 },
      infrastructureBackoff: { initialDelayMs: 500, maxDelayMs: 30_000 },
      partitionsConsumedConcurrently: 4,
      maxWaitTimeInMs: 1_000,
      sessionTimeoutMs: 10_000,
      fromBeginning: true,
      poolSize: 6,
      lanes: 1,
      maxTransactionRecords: 500,
      policies: {},
      defaultPolicy: 'dead-letter',
      unknownEventType: 'dead-letter',
      unknownEventTypes: {},
      dlqRetentionMs: -1,
      handlerTimeoutMs: 30_000,
      topicRefreshMs: 10_000,
      parkKeys: true,
      inboxRetentionMs: 30 * 86_400_000,
      dlqReplayHorizonMs: 7 * 86_400_000,
      allowShortInboxRetention: false,
      inboxPruneIntervalMs: 60_000,
      inboxPruneBatchSize: 5_000,
      inboxPartitionIntervalMs: 0,
      inboxPartitionsAhead: 3,
      inboxPartitionLockTimeoutMs: 200,
      parkedMetricsIntervalMs: 30_000,
      unknownSchemaIdWaitMs: 60_000,
      envelope: { idHeader: 'id', eventTypeHeader: 'eventType', valueFormat: 'bytes' },
    });
    expect(resolveSettings({ config, handlers, lanes: 4, partitionsConsumedConcurrently: 2 }).poolSize).toBe(10);
    expect(resolveSettings({ config, handlers, consumer: 'billing', groupId: 'g', allowGroupIdMismatch: true, backoff: { initialDelayMs: 5 } })).toMatchObject({
      consumer: 'billing',
      groupId: 'g',
      backoff: { initialDelayMs: 5, maxDelayMs: 30_000 },
    });
  });

  it('takes router.envelope from createRouter and refuses a bad one at the edge, naming the setting', () => {
    expect(resolveSettings({ config, handlers, envelope: { defaultContentType: 'Application/JSON; charset=utf-8', valueFormat: 'bytes' } }).envelope).toEqual({
      idHeader: 'id',
      eventTypeHeader: 'eventType',
      defaultContentType: 'application/json',
      valueFormat: 'bytes',
    });
    expect(codeOf(() => resolveSettings({ config, handlers, envelope: { defaultContentType: 'text/plain' } }))).toMatch(/^FLAG_INVALID:.*envelope\.defaultContentType.*application\/json/s);
    expect(codeOf(() => resolveSettings({ config, handlers, envelope: { valueFormat: 'xml' as never } }))).toMatch(/^FLAG_INVALID:.*envelope\.valueFormat/s);
    expect(codeOf(() => resolveSettings({ config, handlers, envelope: { eventTypeField: 'eventType' } }))).toMatch(/envelope\.eventTypeField.*structured value/s);
    expect(codeOf(() => resolveSettings({ config, handlers, envelope: { idHeader: 'event id' } }))).toMatch(/envelope\.idHeader.*no spaces/s);
    expect(codeOf(() => resolveSettings({ config, handlers, envelope: { eventTypeHeader: 'id' } }))).toMatch(/envelope\.eventTypeHeader.*same header as idHeader/s);
    expect(resolveSettings({ config: { ...config, router: { ...config.router, envelope: { valueFormat: 'json', eventTypeField: 'eventType', idHeader: 'id', eventTypeHeader: 'eventType' } } }, handlers }).envelope).toMatchObject({
      valueFormat: 'json',
      eventTypeField: 'eventType',
    });
  });

  it('names bad options with FLAG_INVALID, and unusable handlers with HANDLERS_INVALID', () => {
    expect(codeOf(() => resolveSettings({ config, handlers, maxAttempts: 0 }))).toMatch(/^FLAG_INVALID: Invalid router options:.*maxAttempts/s);
    expect(codeOf(() => resolveSettings({ config, handlers, bogus: 1 } as never))).toMatch(/^FLAG_INVALID/);
    expect(codeOf(() => resolveSettings({ config, handlers: {} }))).toMatch(/^HANDLERS_INVALID: createRouter needs handlers/);
    expect(codeOf(() => resolveSettings({ config, handlers: { order: { OrderCreated: 'nope' } } as never }))).toMatch(/^HANDLERS_INVALID: /);
    expect(codeOf(() => resolveSettings({ config, handlers: { order: { OrderCreated: 'nope' } } as never }))).toMatch(/order\.OrderCreated: a string, neither a function nor \{ batch: function \}/);
    expect(codeOf(() => resolveSettings({ config, handlers: { order: { OrderCreated: { batch: 1 } } } as never }))).toMatch(/order\.OrderCreated: a object/);
    expect(() => resolveSettings({ config, handlers: { order: { OrderCreated: { batch: async () => {} } } } })).not.toThrow();
  });
});

describe('resolveSettings: consumer naming', () => {
  const elsewhere = { ...config, database: { ...config.database, host: 'db.internal', port: 5432 } };

  it('defaults the consumer to outbox-router only on the local stack', () => {
    expect(resolveSettings({ config, handlers }).consumer).toBe('outbox-router');
    expect(codeOf(() => resolveSettings({ config: elsewhere, handlers }))).toMatch(/^CONSUMER_NAME_REQUIRED: The router needs a consumer name for the database at db\.internal:5432.*--consumer/s);
    expect(resolveSettings({ config: elsewhere, handlers, consumer: 'billing' })).toMatchObject({ consumer: 'billing', groupId: 'billing' });
  });

  it('the DLQ commands follow the same rule (consumerName): no silent default off the local stack', () => {
    expect(consumerName(config, undefined)).toBe('outbox-router');
    expect(consumerName(elsewhere, 'billing')).toBe('billing');
    expect(codeOf(() => consumerName(elsewhere, undefined))).toMatch(/^CONSUMER_NAME_REQUIRED: .*db\.internal:5432.*--consumer/s);
  });

  it('refuses a group id other than the consumer name unless allowGroupIdMismatch', () => {
    expect(codeOf(() => resolveSettings({ config, handlers, consumer: 'billing', groupId: 'billing-v2' }))).toMatch(
      /^GROUP_ID_MISMATCH: groupId "billing-v2" differs from consumer "billing".*allowGroupIdMismatch/s,
    );
    expect(codeOf(() => resolveSettings({ config, handlers, groupId: 'other' }))).toMatch(/groupId "other" differs from consumer "outbox-router"/);
    expect(resolveSettings({ config, handlers, consumer: 'billing', groupId: 'billing' }).groupId).toBe('billing');
    expect(resolveSettings({ config, handlers, consumer: 'billing', groupId: 'billing-v2', allowGroupIdMismatch: true }).groupId).toBe('billing-v2');
  });

  it('takes an unknown-event-type policy per aggregate type, and DLQ topic settings', () => {
    expect(resolveSettings({ config, handlers, unknownEventType: 'skip', unknownEventTypes: { order: 'block' }, dlqRetentionMs: 86_400_000, dlqReplicationFactor: 3 })).toMatchObject({
      unknownEventType: 'skip',
      unknownEventTypes: { order: 'block' },
      dlqRetentionMs: 86_400_000,
      dlqReplicationFactor: 3,
    });
    expect(codeOf(() => resolveSettings({ config, handlers, unknownEventTypes: { order: 'ignore' } } as never))).toMatch(/^FLAG_INVALID: .*unknownEventTypes\.order/s);
    expect(codeOf(() => resolveSettings({ config, handlers, dlqRetentionMs: -2 }))).toMatch(/dlqRetentionMs/);
  });
});

describe('router settings from the configuration (config.router, OUTBOX_ROUTER_*)', () => {
  it('createRouter takes config.router, and an option given to it wins', () => {
    const fromEnv = loadConfig({ env: { OUTBOX_ROUTER_CONSUMER: 'billing', OUTBOX_ROUTER_LANES: '3', OUTBOX_ROUTER_MAX_TRANSACTION_RECORDS: '20', OUTBOX_ROUTER_UNKNOWN_EVENT_TYPE: 'skip' } });
    expect(resolveSettings({ config: fromEnv, handlers })).toMatchObject({ consumer: 'billing', groupId: 'billing', lanes: 3, maxTransactionRecords: 20, unknownEventType: 'skip', poolSize: 4 * 3 + 2 });
    expect(resolveSettings({ config: fromEnv, handlers, lanes: 2, consumer: 'shipping' })).toMatchObject({ consumer: 'shipping', lanes: 2, maxTransactionRecords: 20 });
  });

  it('a bad OUTBOX_ROUTER_* value is CONFIG_INVALID naming the setting and the variable', () => {
    expect(codeOf(() => loadConfig({ env: { OUTBOX_ROUTER_LANES: '65' } }))).toMatch(/^CONFIG_INVALID: [\s\S]*router\.lanes \(from OUTBOX_ROUTER_LANES\)/);
    expect(codeOf(() => loadConfig({ env: { OUTBOX_ROUTER_UNKNOWN_EVENT_TYPE: 'ignore' } }))).toMatch(/router\.unknownEventType \(from OUTBOX_ROUTER_UNKNOWN_EVENT_TYPE\)/);
  });

  it('the one default of maxTransactionRecords is the schema\'s (500)', () => {
    expect(loadConfig({ env: {} }).router.maxTransactionRecords).toBe(500);
    expect(resolveSettings({ config, handlers }).maxTransactionRecords).toBe(500);
  });

  it('refuses an idle fetch wait longer than a third of the session timeout, naming both settings', () => {
    const wrong = loadConfig({ env: {}, overrides: { router: { maxWaitTimeInMs: 5_000, sessionTimeoutMs: 10_000 } } });
    expect(() => resolveSettings({ config: wrong, handlers })).toThrow(/router\.maxWaitTimeInMs \(5000\) must be at most a third of router\.sessionTimeoutMs \(10000\)/);
  });
});
