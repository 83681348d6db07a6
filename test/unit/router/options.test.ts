import { loadConfig } from '../../../src/config';
import { isOutboxError } from '../../../src/errors';
import { resolveSettings } from '../../../src/router/options';

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
  it('fills defaults: group = consumer, a connection per partition lane plus two, low fetch wait', () => {
    expect(resolveSettings({ config, handlers })).toEqual({
      consumer: 'outbox-router',
      groupId: 'outbox-router',
      maxAttempts: 5,
      backoff: { initialDelayMs: 200, maxDelayMs: 30_000 },
      infrastructureBackoff: { initialDelayMs: 500, maxDelayMs: 30_000 },
      partitionsConsumedConcurrently: 4,
      maxWaitTimeInMs: 50,
      sessionTimeoutMs: 10_000,
      fromBeginning: true,
      poolSize: 6,
      lanes: 1,
      maxTransactionRecords: 50,
      policies: {},
      defaultPolicy: 'dead-letter',
      unknownEventType: 'dead-letter',
      handlerTimeoutMs: 30_000,
      topicRefreshMs: 10_000,
      parkKeys: true,
    });
    expect(resolveSettings({ config, handlers, lanes: 4, partitionsConsumedConcurrently: 2 }).poolSize).toBe(10);
    expect(resolveSettings({ config, handlers, consumer: 'billing', groupId: 'g', backoff: { initialDelayMs: 5 } })).toMatchObject({
      consumer: 'billing',
      groupId: 'g',
      backoff: { initialDelayMs: 5, maxDelayMs: 30_000 },
    });
  });

  it('names bad options with CONFIG_INVALID', () => {
    expect(codeOf(() => resolveSettings({ config, handlers, maxAttempts: 0 }))).toMatch(/^CONFIG_INVALID: .*maxAttempts/s);
    expect(codeOf(() => resolveSettings({ config, handlers, bogus: 1 } as never))).toMatch(/^CONFIG_INVALID/);
    expect(codeOf(() => resolveSettings({ config, handlers: {} }))).toMatch(/^CONFIG_INVALID: createRouter needs handlers/);
    expect(codeOf(() => resolveSettings({ config, handlers: { order: { OrderCreated: 'nope' } } as never }))).toMatch(/handlers\.order\.OrderCreated is a string/);
  });
});
