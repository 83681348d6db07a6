import { setTimeout as sleep } from 'node:timers/promises';
import type { KafkaMessage } from 'kafkajs';
import { ParkedKeys } from '../../../src/router/parked';
import { runPartitionBatch } from '../../../src/router/partition-batch';
import type { BatchHandler, EventHandler, Handlers } from '../../../src/router/types';
import { fakeDeps, type FakeDeps } from './fake-deps';
import { fakePool } from './fake-pool';

const ID = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

function message(n: number, eventType = 'A', key = `k${n % 5}`): KafkaMessage {
  return {
    key: Buffer.from(key),
    value: Buffer.from(JSON.stringify({ n })),
    headers: { id: ID(n), eventType, contentType: 'application/json' },
    offset: String(n),
    timestamp: '0',
    attributes: 0,
  } as KafkaMessage;
}

/** Runs one partition batch with chunks of up to `maxTransactionRecords`; returns the resolved offsets. */
async function run(d: FakeDeps, messages: readonly KafkaMessage[], maxTransactionRecords = 50): Promise<string[]> {
  const resolved: string[] = [];
  await runPartitionBatch('t', 0, messages, d, d, { lanes: 1, maxTransactionRecords, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => false, revoked: () => false });
  return resolved;
}

/** A batch handler recording the event numbers of each call. */
function recording(calls: number[][]): { batch: BatchHandler<{ n: number }> } {
  return { batch: async (events) => void calls.push(events.map((e) => e.payload.n)) };
}

function deps(handlers: Handlers, overrides: Partial<FakeDeps> = {}) {
  const fake = fakePool();
  const built = fakeDeps({ handlers: handlers as Handlers, aggregateTypeOf: () => 'order', maxAttempts: 2, ...overrides, pool: overrides.pool ?? fake.pool });
  return { ...built, log: fake.log, inbox: fake.inbox };
}

describe('batch handlers', () => {
  it('receive only the fresh events of a chunk (after inbox dedup), in offset order, in one call', async () => {
    const calls: number[][] = [];
    const { d, stats } = deps({ order: { A: recording(calls) } });
    await run(d, [message(2), message(5)]);
    calls.length = 0;
    const resolved = await run(d, Array.from({ length: 8 }, (_, i) => message(i)));
    expect(calls).toEqual([[0, 1, 3, 4, 6, 7]]);
    expect(resolved).toHaveLength(8);
    expect(stats).toMatchObject({ applied: 8, duplicates: 2 });
  });

  it('split mixed types into runs in order; consecutive types sharing one batch function go in one call', async () => {
    const order: string[] = [];
    const shared: BatchHandler<{ n: number }> = async (events) => void order.push(`shared ${events.map((e) => e.payload.n).join(',')}`);
    const c: BatchHandler<{ n: number }> = async (events) => void order.push(`c ${events.map((e) => e.payload.n).join(',')}`);
    const each: EventHandler<{ n: number }> = async (event) => void order.push(`each ${event.payload.n}`);
    const { d } = deps({ order: { A: { batch: shared }, B: { batch: shared }, C: { batch: c }, P: each } });
    const types = ['A', 'A', 'B', 'P', 'P', 'A', 'C', 'C', 'A'];
    await run(d, types.map((t, i) => message(i, t)));
    expect(order).toEqual(['shared 0,1,2', 'each 3', 'each 4', 'shared 5', 'c 6,7', 'shared 8']);
  });

  it('a failing batch call splits the chunk: each record alone, the batch handler called with one event, the bad one dead-lettered', async () => {
    const calls: number[][] = [];
    const { d, letters, stats, events } = deps({
      order: {
        A: {
          batch: async (evs: ReadonlyArray<{ payload: { n: number } }>) => {
            calls.push(evs.map((e) => e.payload.n));
            if (evs.some((e) => e.payload.n === 2)) throw new Error('event 2 is bad');
          },
        },
      },
    });
    const resolved = await run(d, Array.from({ length: 4 }, (_, i) => message(i)));
    expect(events).toContain('router.chunk-split');
    expect(calls).toEqual([[0, 1, 2, 3], [0], [1], [2], [2], [3]]);
    expect(letters.map((l) => l.message.headers?.id)).toEqual([ID(2)]);
    expect(stats).toMatchObject({ applied: 3, deadLettered: 1 });
    expect(resolved).toEqual(['0', '1', '2', '3']);
  });
});

describe("the router's own round trips per chunk", () => {
  /** The round trips of one batch of `records`, with per-event or batch handlers and parked keys loaded. */
  async function roundTrips(records: number, handler: 'event' | 'batch'): Promise<string[]> {
    const fake = fakePool();
    const handlers: Handlers = { order: { A: handler === 'event' ? async () => {} : { batch: async () => {} } } };
    const { d } = fakeDeps({ handlers, pool: fake.pool });
    d.parked = await ParkedKeys.load(fake.pool, 'parked', 'c', 'order', ['k0', 'k1']);
    // Once per pool, not per chunk: the catalog query for the inbox's key function (migration 016).
    await run(d, [message(1000)]);
    fake.log.length = 0;
    await run(d, Array.from({ length: records }, (_, i) => message(i)));
    return fake.log;
  }

  it('looks up the inbox key function once per pool, before the first chunk only', async () => {
    const fake = fakePool();
    const { d } = fakeDeps({ handlers: { order: { A: async () => {} } }, pool: fake.pool });
    d.parked = await ParkedKeys.load(fake.pool, 'parked', 'c', 'order', ['k0', 'k1']);
    fake.log.length = 0;
    await run(d, [message(1)]);
    await run(d, [message(2)]);
    expect(fake.log).toEqual(['SELECT', 'BEGIN', 'SELECT', 'BEGIN', 'SELECT']);
  });

  it.each(['event', 'batch'] as const)('is two for a chunk of 50 as for a chunk of 2 (%s handlers): BEGIN + inbox INSERT, then the closing check with the parked guard and COMMIT', async (handler) => {
    const expected = ['BEGIN', 'SELECT'];
    expect(await roundTrips(50, handler)).toEqual(expected);
    expect(await roundTrips(2, handler)).toEqual(expected);
    expect(await roundTrips(100, handler)).toEqual([...expected, ...expected]); // two chunks of 50
  });

  it('arms one handler-timeout timer per transaction, not one per handler, and still times out a slow handler', async () => {
    const spy = jest.spyOn(global, 'setTimeout');
    try {
      const { d } = deps({ order: { A: async () => {} } }, { handlerTimeoutMs: 60_000 });
      await run(d, Array.from({ length: 50 }, (_, i) => message(i)));
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
    const { d, letters, stats } = deps({ order: { A: async (event: { payload: { n: number } }) => void (event.payload.n === 1 && (await sleep(200))) } }, { handlerTimeoutMs: 30, maxAttempts: 1 });
    await run(d, Array.from({ length: 3 }, (_, i) => message(i)));
    expect(letters.map((l) => l.message.headers?.['x-error-code'])).toEqual(['HANDLER_TIMEOUT']);
    expect(stats).toMatchObject({ applied: 2, deadLettered: 1 });
  });
});
