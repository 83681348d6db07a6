import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../../src/config';
import { dlqTopicPattern, firingAlerts, formatBytes, routedTopicPattern, targetsLocalStack, topicLag } from '../../../src/status';
import { describeError, maskUrl, withTimeout } from '../../../src/status/format';
import { watchdogBase } from '../../../src/status/sections';
import { OutboxError } from '../../../src/errors';

describe('status helpers', () => {
  it('formatBytes prints binary units with one decimal, and - for unknown', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(16 * 2 ** 20)).toBe('16.0 MiB');
    expect(formatBytes(-2048)).toBe('-2.0 KiB');
    expect(formatBytes(null)).toBe('-');
  });

  it('maskUrl hides credentials; describeError keeps OutboxError messages and adds the hint otherwise', () => {
    expect(maskUrl('http://admin:s3cret@connect:8083/x')).toBe('http://[redacted]@connect:8083/x');
    expect(describeError(new OutboxError('DB_UNAVAILABLE', 'Cannot connect. Fix it.'), 'HINT')).toBe('Cannot connect. Fix it.');
    expect(describeError(Object.assign(new Error('connect refused\nstack'), { code: 'ECONNREFUSED' }), 'Start it.')).toBe('ECONNREFUSED: connect refused. Start it.');
    expect(describeError(new Error('GET http://u:p@h/ failed'), 'x')).not.toContain('u:p');
  });

  it('withTimeout rejects with the limit and the hint when the work is too slow', async () => {
    await expect(withTimeout(20, () => sleep(500), 'Check X.')).rejects.toThrow('no answer within 20 ms (--timeout). Check X.');
    await expect(withTimeout(500, async () => 7, 'x')).resolves.toBe(7);
  });

  it('derives routed and DLQ topic patterns from connector.topicReplacement', () => {
    const plain = loadConfig({ env: {} });
    expect(routedTopicPattern(plain).source).toBe('^outbox\\.event\\..+$');
    expect(dlqTopicPattern(plain).test('outbox.dlq.order')).toBe(true);
    expect(dlqTopicPattern(plain).test('outbox.event.order')).toBe(false);
    const prefixed = loadConfig({ env: {}, overrides: { connector: { topicReplacement: 'staging.outbox.event.${routedByValue}' } } });
    expect(routedTopicPattern(prefixed).test('staging.outbox.event.order')).toBe(true);
    expect(routedTopicPattern(prefixed).test('outbox.event.order')).toBe(false);
    expect(dlqTopicPattern(prefixed).test('staging.outbox.dlq.order')).toBe(true);
    const custom = loadConfig({ env: {}, overrides: { connector: { topicReplacement: 'events-${routedByValue}' } } });
    expect(dlqTopicPattern(custom).source).toBe('^outbox\\.dlq\\..+$');
  });

  it('topicLag counts from the committed offset, or from the low watermark without one', () => {
    const marks = new Map([
      [0, { low: 0, high: 10 }],
      [1, { low: 5, high: 8 }],
      [2, { low: 4, high: 9 }],
    ]);
    const lag = topicLag('t', new Map([[0, 7], [2, 2]]), marks);
    expect(lag.partitions.map((p) => p.lag)).toEqual([3, 3, 5]);
    expect(lag.partitions[1]?.committed).toBeNull();
    expect(lag.lag).toBe(11);
  });

  it('firingAlerts finds firing alerts in any shape of /healthz body', () => {
    expect(firingAlerts({ alerts: { SlotInactive: 'firing', SlotLag: 'ok' } })).toEqual(['SlotInactive']);
    expect(firingAlerts({ alerts: [{ name: 'A', state: 'firing' }, { name: 'B', state: 'inactive' }] })).toEqual(['A']);
    expect(firingAlerts({ checks: { walLost: { status: 'FIRING' } } })).toEqual(['walLost']);
    expect(firingAlerts({ firing: ['X', { alertname: 'Y' }] })).toEqual(['X', 'Y']);
    expect(firingAlerts({ rules: { z: { firing: true } } })).toEqual(['z']);
    expect(firingAlerts('ok')).toEqual([]);
    expect(firingAlerts({ status: 'ok' })).toEqual([]);
  });

  it('watchdogBase accepts the base URL, /metrics or /healthz', () => {
    expect(watchdogBase('http://127.0.0.1:9465/metrics')).toBe('http://127.0.0.1:9465');
    expect(watchdogBase('http://127.0.0.1:9465/healthz/')).toBe('http://127.0.0.1:9465');
    expect(watchdogBase('http://w:9465/')).toBe('http://w:9465');
  });

  it('targetsLocalStack is true for the default configuration and false for remote hosts', () => {
    expect(targetsLocalStack(loadConfig({ env: {} }))).toBe(true);
    const remote = loadConfig({
      env: {},
      overrides: { database: { host: 'db.internal' }, kafka: { brokers: ['kafka-1:9092'] }, connect: { url: 'http://connect:8083' } },
    });
    expect(targetsLocalStack(remote)).toBe(false);
  });
});
