/** src/connector/deploy.ts: connector.exactlyOnce against a Connect worker without exactly-once source support. */
import { loadConfig } from '../../../src/config';
import { deployConnector, type ConnectClient } from '../../../src/connector';
import { isOutboxError, type OutboxError } from '../../../src/errors';

/** What Kafka Connect 4.3.1's validate endpoint answered on the local stack (worker without EOS), as the client reduces it. */
const WORKER_WITHOUT_EOS = { field: 'exactly.once.support', errors: ['This worker does not have exactly-once source support enabled.'] };

function fakeClient(fields: Array<{ field: string; errors: string[] }>): { client: ConnectClient; writes: string[] } {
  const writes: string[] = [];
  const refuse = (what: string) => () => {
    writes.push(what);
    throw new Error(`${what} must not be called after a failed validation`);
  };
  const client = {
    validate: async () => ({ errorCount: fields.reduce((n, f) => n + f.errors.length, 0), fields }),
    getConfig: refuse('getConfig'),
    putConfig: refuse('putConfig'),
    create: refuse('create'),
  } as unknown as ConnectClient;
  return { client, writes };
}

async function deployError(fields: Array<{ field: string; errors: string[] }>, exactlyOnce = true): Promise<{ error: OutboxError; writes: string[] }> {
  const { client, writes } = fakeClient(fields);
  const config = loadConfig({ env: {}, overrides: { connector: { exactlyOnce } } });
  try {
    await deployConnector(config, { client });
  } catch (error) {
    if (isOutboxError(error)) return { error, writes };
    throw error;
  }
  throw new Error('expected the deploy to fail');
}

describe('connector:deploy with connector.exactlyOnce on a worker without exactly-once source support', () => {
  it('refuses with CONNECT_EXACTLY_ONCE_DISABLED, naming the worker setting and the way back, before touching anything', async () => {
    const { error, writes } = await deployError([WORKER_WITHOUT_EOS]);
    expect(error.code).toBe('CONNECT_EXACTLY_ONCE_DISABLED');
    const named = [
      'This worker does not have exactly-once source support enabled.', // Connect's own words
      'exactly.once.source.support=enabled', // the fix on the workers
      'OUTBOX_STACK_EXACTLY_ONCE=enabled', // the fix on the local stack
      'connector.exactlyOnce=false (OUTBOX_CONNECTOR_EXACTLY_ONCE=false)', // the way back
      'nothing was deployed',
    ];
    for (const part of named) expect(error.message).toContain(part);
    expect(writes).toEqual([]);
  });

  it('reports other validation errors as CONNECTOR_CONFIG_INVALID, as before', async () => {
    const { error } = await deployError([{ field: 'database.hostname', errors: ['Connection refused'] }]);
    expect(error.code).toBe('CONNECTOR_CONFIG_INVALID');
  });
});
