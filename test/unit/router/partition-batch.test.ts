import { setTimeout as sleep } from 'node:timers/promises';
import type { KafkaMessage } from 'kafkajs';
import { OutboxError } from '../../../src/errors';
import { laneOf, runPartitionBatch } from '../../../src/router/partition-batch';
import { fakeDeps, type FakeDeps } from './fake-deps';

const ID = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

function message(offset: number, key: string): KafkaMessage {
  return {
    key: Buffer.from(key),
    value: Buffer.from(JSON.stringify({ n: offset })),
    headers: { id: ID(offset), eventType: 'E', contentType: 'application/json' },
    offset: String(offset),
    timestamp: '0',
    attributes: 0,
  } as KafkaMessage;
}

/** Each handler call can be delayed to reorder lanes. */
function deps(handler: (payload: { n: number }) => Promise<void>): FakeDeps {
  return fakeDeps({
    handlers: { t: { E: async (event) => handler(event.payload as { n: number }) } },
    inboxTable: 'inbox',
    maxAttempts: 1,
    backoff: { initialDelayMs: 1, maxDelayMs: 1 },
    infrastructureBackoff: { initialDelayMs: 1, maxDelayMs: 1 },
    aggregateTypeOf: () => 't',
    dlqTopicFor: () => 'dlq',
  }).d;
}

describe('laneOf', () => {
  it('is stable for a key and spreads keys over the lanes', () => {
    expect(laneOf(Buffer.from('order-1'), 8)).toBe(laneOf('order-1', 8));
    const lanes = new Set(Array.from({ length: 200 }, (_, i) => laneOf(`k${i}`, 8)));
    expect(lanes.size).toBe(8);
    expect(laneOf(null, 8)).toBe(0);
    expect(laneOf('x', 1)).toBe(0);
  });
});

describe('runPartitionBatch', () => {
  it('applies the records decoded before one whose decode waits, before the wait: they do not wait with it', async () => {
    const handled: number[] = [];
    const resolved: string[] = [];
    const d = deps(async ({ n }) => void handled.push(n));
    const abort = new AbortController();
    let waitsSeen: Array<{ handled: number[]; resolved: string[] }> = [];
    d.signal = abort.signal;
    // Record 3's decode fails retriably (the registry is away) until the test has seen two waits.
    d.codec = {
      decode: async (bytes: Buffer) => {
        const payload = JSON.parse(bytes.toString()) as { n: number };
        if (payload.n === 3) throw new OutboxError('REGISTRY_UNAVAILABLE', 'away', { retriable: true });
        return payload;
      },
    };
    d.emit = (name) => {
      if (name !== 'router.wait') return;
      waitsSeen = [...waitsSeen, { handled: [...handled], resolved: [...resolved] }];
      if (waitsSeen.length === 2) abort.abort();
    };
    const messages = Array.from({ length: 5 }, (_, i) => message(i, `k${i}`));
    await runPartitionBatch('t', 0, messages, d, d, { lanes: 1, maxTransactionRecords: 500, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => abort.signal.aborted, revoked: () => false });
    expect(waitsSeen[0]).toEqual({ handled: [0, 1, 2], resolved: ['0', '1', '2'] });
    expect(handled).toEqual([0, 1, 2]);
  });

  it('keeps each key in offset order across lanes and resolves only a contiguous prefix of offsets', async () => {
    const keys = ['a', 'b', 'c', 'd'];
    const messages = Array.from({ length: 40 }, (_, i) => message(i, keys[i % keys.length] as string));
    const handled: number[] = [];
    const resolved: string[] = [];
    // Later records finish sooner: lanes race, and a naive "resolve when done" would skip past holes.
    const d = deps(async ({ n }) => {
      await sleep((40 - n) % 7);
      handled.push(n);
    });
    const last = await runPartitionBatch('t', 0, messages, d, d, { lanes: 4, maxTransactionRecords: 1, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => false, revoked: () => false });
    expect(last).toBe('39');
    expect(resolved).toEqual(messages.map((m) => m.offset)); // every offset, in order, each once
    for (const key of keys) {
      const mine = handled.filter((n) => keys[n % keys.length] === key);
      expect(mine).toEqual([...mine].sort((x, y) => x - y));
    }
    expect(d.stats.applied).toBe(40);
  });

  it('leaves the rest of the batch unresolved when stopped in the middle', async () => {
    const messages = Array.from({ length: 10 }, (_, i) => message(i, 'k'));
    const resolved: string[] = [];
    let handledCount = 0;
    const d = deps(async () => {
      handledCount++;
    });
    await runPartitionBatch('t', 0, messages, d, d, { lanes: 1, maxTransactionRecords: 1, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => handledCount >= 3, revoked: () => false });
    expect(resolved).toEqual(['0', '1', '2']);
  });
});

describe('runPartitionBatch: a lane that fails, a partition that is revoked', () => {
  /** Two keys that land in different lanes of two. */
  const [slowKey, failingKey] = ((): [string, string] => {
    const keys = Array.from({ length: 20 }, (_, i) => `k${i}`);
    const first = keys[0] as string;
    return [first, keys.find((k) => laneOf(k, 2) !== laneOf(first, 2)) as string];
  })();

  it('a failing lane stops its siblings before the batch returns, and rethrows the failure', async () => {
    const messages = [message(0, failingKey), ...Array.from({ length: 10 }, (_, i) => message(i + 1, slowKey))];
    let slowHandled = 0;
    const d = deps(async ({ n }) => {
      if (n === 0) throw new Error('handler failure: retried, and the retry heartbeat finds the group rebalancing');
      await sleep(30);
      slowHandled++;
    });
    d.maxAttempts = 3;
    d.heartbeat = async () => {
      throw Object.assign(new Error('The group is rebalancing, so a rejoin is needed'), { type: 'REBALANCE_IN_PROGRESS' });
    };
    const outcome = await runPartitionBatch('t', 0, messages, d, d, { lanes: 2, maxTransactionRecords: 1, resolveOffset: () => {}, progress: async () => {}, stopped: () => false, revoked: () => false }).then(
      () => 'resolved',
      (error: Error) => error.message,
    );
    const atReturn = slowHandled;
    await sleep(400);
    expect(outcome).toMatch(/rebalancing/);
    expect(slowHandled).toBe(atReturn); // nothing ran behind the caller's back
    expect(atReturn).toBeLessThan(10); // the sibling stopped early
  });

  it('resolves no offset once the partition is revoked, even of a record finished after it', async () => {
    const messages = Array.from({ length: 6 }, (_, i) => message(i, 'k'));
    const resolved: string[] = [];
    let revoked = false;
    const d = deps(async ({ n }) => {
      if (n === 2) revoked = true; // the rebalance lands while record 2's transaction runs
    });
    await runPartitionBatch('t', 0, messages, d, d, { lanes: 1, maxTransactionRecords: 1, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => revoked, revoked: () => revoked });
    expect(resolved).toEqual(['0', '1']);
    expect(d.stats.applied).toBe(3);
  });
});

describe('runPartitionBatch: an event type without a handler under the block policy', () => {
  it('applies the ready records before it, then holds the lane on it until stopped', async () => {
    const messages = [message(0, 'a'), message(1, 'b'), { ...message(2, 'c'), headers: { id: ID(2), eventType: 'Unknown', contentType: 'application/json' } } as KafkaMessage, message(3, 'd')];
    const resolved: string[] = [];
    const stop = new AbortController();
    const d = deps(async () => {});
    d.unknownEventType = 'block';
    d.signal = stop.signal;
    d.heartbeat = async () => stop.abort(); // the router stops while the lane is blocked
    await runPartitionBatch('t', 0, messages, d, d, { lanes: 1, maxTransactionRecords: 50, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => stop.signal.aborted, revoked: () => false });
    expect(resolved).toEqual(['0', '1']);
    expect(d.stats.applied).toBe(2);
  });
});

describe('runPartitionBatch: a long batch yields to the partitions waiting on it', () => {
  const messages = Array.from({ length: 20 }, (_, i) => message(i, `k${i}`));
  const slow = () => deps(async () => void (await sleep(15)));
  const run = async (othersWaiting: boolean) => {
    const resolved: string[] = [];
    const d = slow();
    await runPartitionBatch('t', 0, messages, d, d, { lanes: 1, maxTransactionRecords: 1, resolveOffset: (o) => resolved.push(o), progress: async () => {}, stopped: () => false, revoked: () => false, yieldAfterMs: 40, othersWaiting: () => othersWaiting });
    return resolved;
  };

  it('starts no new record once past yieldAfterMs while others wait; what it did is a resolved prefix, the rest is fetched again', async () => {
    const resolved = await run(true);
    expect(resolved.length).toBeGreaterThan(0);
    expect(resolved.length).toBeLessThan(20);
    expect(resolved).toEqual(messages.slice(0, resolved.length).map((m) => m.offset));
  });

  it('goes on to the end when no other partition waits', async () => {
    expect(await run(false)).toHaveLength(20);
  });
});
