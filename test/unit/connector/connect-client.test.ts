/**
 * src/connector/connect-client.ts and retry.ts with a fake transport (the HTTP boundary is injected):
 * error mapping, 409 retries with backoff and jitter up to a ceiling, and the 404 conventions.
 */
import { createConnectClient, type HttpRequest, type HttpResponse } from '../../../src/connector';
import { backoffDelay, retry } from '../../../src/retry';
import { OutboxError } from '../../../src/errors';
import { rejection } from '../../support/expect-error';

const settings = { url: 'http://connect.test:8083', requestTimeoutMs: 1234 };
const conflict: HttpResponse = { status: 409, data: { error_code: 409, message: 'Cannot complete request momentarily due to no known leader URL, likely because a rebalance was underway.' } };

function fake(responses: Array<HttpResponse | Error>) {
  const calls: HttpRequest[] = [];
  const http = async (request: HttpRequest): Promise<HttpResponse> => {
    calls.push(request);
    const next = responses.length > 1 ? responses.shift() : responses[0];
    if (next instanceof Error) throw next;
    return next as HttpResponse;
  };
  return { calls, http };
}

function client(responses: Array<HttpResponse | Error>, retryOverrides = {}) {
  const { calls, http } = fake(responses);
  const sleeps: number[] = [];
  const c = createConnectClient(settings, {
    http,
    retry: { attempts: 5, initialDelayMs: 100, maxDelayMs: 1_000, ceilingMs: 60_000, sleep: async (ms: number) => void sleeps.push(ms), random: () => 0.5, ...retryOverrides },
  });
  return { c, calls, sleeps };
}


describe('409 during a rebalance', () => {
  it('is retried with growing, jittered delays until Connect answers', async () => {
    const { c, calls, sleeps } = client([conflict, conflict, { status: 200, data: { 'slot.name': 's' } }]);
    await expect(c.getConfig('x')).resolves.toEqual({ 'slot.name': 's' });
    expect(calls).toHaveLength(3);
    expect(sleeps).toEqual([75, 150]); // half fixed + half jitter (random 0.5) of 100, 200
  });

  it('gives up after the attempts, as a retriable CONNECT_REQUEST_FAILED naming status and message', async () => {
    const { c, calls } = client([conflict]);
    const error = await rejection(c.putConfig('x', { a: '1' }));
    expect(calls).toHaveLength(5);
    expect(error.code).toBe('CONNECT_REQUEST_FAILED');
    expect(error.retriable).toBe(true);
    expect(error.details.status).toBe(409);
    expect(error.message).toContain('PUT /connectors/x/config with 409');
    expect(error.message).toContain('rebalance was underway');
  });

  it('stops at the time ceiling even with attempts left', async () => {
    let now = 0;
    const { c, calls } = client([conflict], { attempts: 100, ceilingMs: 1_000, now: () => now, sleep: async (ms: number) => void (now += ms) });
    await rejection(c.status('x'));
    expect(calls.length).toBeGreaterThan(2);
    expect(calls.length).toBeLessThan(10);
    expect(now).toBeLessThanOrEqual(1_000);
  });

  it('a read answered with 500 during a rebalance is retried; a write is not', async () => {
    const rebalance: HttpResponse = { status: 500, data: { error_code: 500, message: 'Request cannot be completed because a rebalance is expected' } };
    const read = client([rebalance, { status: 200, data: [{ id: { connector: 'x', task: 0 }, config: { a: '1' } }] }]);
    await expect(read.c.tasks('x')).resolves.toHaveLength(1);
    expect(read.calls).toHaveLength(2);
    const write = client([rebalance, { status: 200, data: {} }]);
    await rejection(write.c.putConfig('x', { a: '1' }));
    expect(write.calls).toHaveLength(1);
  });

  it('is not retried when creating: "already exists" does not go away', async () => {
    const { c, calls } = client([{ status: 409, data: { message: 'Connector x already exists' } }]);
    const error = await rejection(c.create('x', {}, 'STOPPED'));
    expect(calls).toHaveLength(1);
    expect(calls[0]?.body).toEqual({ name: 'x', config: {}, initial_state: 'STOPPED' });
    expect(error.message).toContain('already exists');
  });
});

describe('other answers', () => {
  it('does not retry a 400 and quotes Connect', async () => {
    const { c, calls } = client([{ status: 400, data: { error_code: 400, message: 'Connector configuration is invalid' } }]);
    const error = await rejection(c.putConfig('x', {}));
    expect(calls).toHaveLength(1);
    expect(error.retriable).toBe(false);
    expect(error.message).toContain('400: Connector configuration is invalid');
  });

  it('names the credentials settings on 401', async () => {
    const { c } = client([{ status: 401, data: 'Unauthorized' }]);
    expect((await rejection(c.list())).message).toContain('OUTBOX_CONNECT_USERNAME');
  });

  it('maps 404 to undefined, [] or false where absence is an answer', async () => {
    const notFound = { status: 404, data: { message: 'Connector x not found' } };
    expect(await client([notFound]).c.getConfig('x')).toBeUndefined();
    expect(await client([notFound]).c.status('x')).toBeUndefined();
    expect(await client([notFound]).c.offsets('x')).toEqual([]);
    expect(await client([notFound]).c.delete('x')).toBe(false);
    expect(await client([{ status: 204, data: '' }]).c.delete('x')).toBe(true);
    expect((await rejection(client([notFound]).c.pause('x'))).details.status).toBe(404);
  });

  it('turns a refused connection into a retriable CONNECT_UNREACHABLE naming the URL and the fix', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8083'), { code: 'ECONNREFUSED' });
    const { c, calls } = client([refused]);
    const error = await rejection(c.list());
    expect(calls).toHaveLength(1);
    expect(error.code).toBe('CONNECT_UNREACHABLE');
    expect(error.retriable).toBe(true);
    expect(error.message).toContain('http://connect.test:8083');
    expect(error.message).toContain('npm run stack:up');
    expect(error.message).toContain('config.connect.url');
  });

  it('reports a timeout with the request and the timeout setting', async () => {
    const timeout = Object.assign(new Error('timeout of 1234ms exceeded'), { code: 'ECONNABORTED' });
    const error = await rejection(client([timeout]).c.validate({}));
    expect(error.code).toBe('CONNECT_UNREACHABLE');
    expect(error.message).toContain('within 1234 ms');
  });
});

describe('operations', () => {
  it('returns only the fields with errors from validate', async () => {
    const { c, calls } = client([
      { status: 200, data: { error_count: 1, configs: [{ value: null }, { value: { name: 'a', errors: [] } }, { value: { name: 'database.dbname', errors: ['no such db'] } }] } },
    ]);
    expect(await c.validate({ a: '1' })).toEqual({ errorCount: 1, fields: [{ field: 'database.dbname', errors: ['no such db'] }] });
    expect(calls[0]).toMatchObject({ method: 'PUT', path: '/connector-plugins/PostgresConnector/config/validate', body: { a: '1' } });
  });

  it('restarts only failed instances, tasks included, and escapes names in paths', async () => {
    const { c, calls } = client([{ status: 202, data: {} }]);
    await c.restart('a b/c');
    expect(calls[0]).toEqual({ method: 'POST', path: '/connectors/a%20b%2Fc/restart', query: { includeTasks: 'true', onlyFailed: 'true' } });
  });
});

describe('retry helper', () => {
  it('keeps delays between half and all of the capped exponential', () => {
    const opts = { initialDelayMs: 100, maxDelayMs: 1_000 };
    expect(backoffDelay(1, opts, () => 0)).toBe(50);
    expect(backoffDelay(1, opts, () => 1)).toBe(100);
    expect(backoffDelay(10, opts, () => 1)).toBe(1_000);
    expect(backoffDelay(10, opts, () => 0)).toBe(500);
  });

  it('does not retry errors that are not retriable', async () => {
    let calls = 0;
    const error = new OutboxError('CONFIG_INVALID', 'no');
    await expect(retry(async () => { calls++; throw error; }, { attempts: 5, initialDelayMs: 1, maxDelayMs: 1, ceilingMs: 1_000 })).rejects.toBe(error);
    expect(calls).toBe(1);
  });
});
