import { createRequire } from 'node:module';
import { fixRequestQueueIdleLoop } from '../../../src/kafka';

/**
 * kafkajs 2.2.4's request queue re-armed a 1 ms timer after every check, pending requests or not: an idle
 * connection checked its empty queue about a thousand times a second. Pure logic on kafkajs's own class
 * (no broker): what a check leaves scheduled.
 */
const load = createRequire(__filename);
type Queue = { pending: unknown[]; throttledUntil: number; throttleCheckTimeoutId: NodeJS.Timeout | null; checkPendingRequests(): void; destroy(): void };
const RequestQueue = load('kafkajs/src/network/requestQueue/index.js') as new (options: Record<string, unknown>) => Queue;
const silent = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, namespace: () => silent };

function queue(): Queue {
  return new RequestQueue({ instrumentationEmitter: undefined, maxInFlightRequests: 1, requestTimeout: 30_000, enforceRequestTimeout: false, clientId: 'c', broker: 'b:9092', logger: silent });
}

describe('kafkajs 2.2.4 request queue at rest', () => {
  it('is fixed when the toolkit loads its Kafka module', () => {
    expect(fixRequestQueueIdleLoop()).toBe(true);
  });

  it('schedules nothing after a check with no pending request', () => {
    const q = queue();
    q.checkPendingRequests();
    expect(q.throttleCheckTimeoutId).toBeNull();
  });

  it('still schedules a check while a request waits: after the throttle time, or kafkajs\'s 10 ms', () => {
    jest.useFakeTimers();
    try {
      const q = queue();
      let checks = 0;
      const original = q.checkPendingRequests.bind(q);
      q.checkPendingRequests = () => {
        checks++;
        q.pending.length = 0;
        original();
      };
      q.pending.push({});
      q.throttledUntil = Date.now() + 250;
      (q as unknown as { scheduleCheckPendingRequests(): void }).scheduleCheckPendingRequests();
      jest.advanceTimersByTime(249);
      expect(checks).toBe(0);
      jest.advanceTimersByTime(1);
      expect(checks).toBe(1);
      q.pending.push({});
      q.throttledUntil = -1;
      (q as unknown as { scheduleCheckPendingRequests(): void }).scheduleCheckPendingRequests();
      jest.advanceTimersByTime(10);
      expect(checks).toBe(2);
      expect(q.throttleCheckTimeoutId).toBeNull();
    } finally {
      jest.useRealTimers();
    }
  });
});
