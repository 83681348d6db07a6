import { Webhook } from 'standardwebhooks';
import type { AlertNotification } from '../../../src/watchdog/alert-engine';
import { createDeliverer, createReceivers, isRetriableStatus, parseRetryAfter, safeTarget, type HttpPost } from '../../../src/watchdog/deliver';
import { wdConfig } from './fixtures';

const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

function notification(over: Partial<AlertNotification> = {}): AlertNotification {
  return {
    id: 'msg_abc', dedupKey: 'k1', event: 'firing', status: 'firing', severity: 'warning', previousSeverity: null, rule: 'SlotInactive', cluster: 'c1',
    slot: { name: 's1', type: 'logical', database: 'app', plugin: 'pgoutput' }, summary: 'Slot s1 …', startsAt: '2026-01-01T00:00:00.000Z', endsAt: null,
    at: '2026-01-01T00:00:00.000Z', values: { retainedBytes: 5 },
    ...over,
  };
}

interface Call {
  url: string;
  body: string;
  headers: Record<string, string>;
}

/** A fake receiver answering the scripted statuses in turn (`error` = no response). */
function scripted(answers: Array<number | 'error' | { status: number; retryAfter: string }>) {
  const calls: Call[] = [];
  const post: HttpPost = async (url, body, headers) => {
    calls.push({ url, body, headers });
    const a = answers.shift() ?? 200;
    if (a === 'error') throw Object.assign(new Error('timeout of 10000ms exceeded'), { code: 'ECONNABORTED' });
    if (typeof a === 'number') return { status: a, headers: {} };
    return { status: a.status, headers: { 'retry-after': a.retryAfter } };
  };
  return { calls, post };
}

/** A fake clock whose sleep advances time instantly and records the waits. */
function fakeTime() {
  let t = 1_767_225_600_000;
  const sleeps: number[] = [];
  return {
    now: () => t,
    sleeps,
    sleep: async (ms: number) => {
      sleeps.push(ms);
      t += ms;
      return true;
    },
  };
}

function setup(answers: Parameters<typeof scripted>[0], watchdog: Parameters<typeof wdConfig>[0] = {}) {
  const config = wdConfig({ webhookUrl: 'http://127.0.0.1:1/hook', webhookSecret: SECRET, ...watchdog });
  const http = scripted(answers);
  const time = fakeTime();
  const events: Array<[string, Record<string, unknown>]> = [];
  const deliverer = createDeliverer({ receivers: createReceivers(config), settings: config.delivery, post: http.post, now: time.now, sleep: time.sleep, random: () => 0.5, onEvent: (n, d) => events.push([n, d]) });
  return { config, http, time, events, deliverer };
}

describe('delivery', () => {
  it('signs the generic webhook per Standard Webhooks: verifiable with the secret', async () => {
    const { http, deliverer, time } = setup([200]);
    deliverer.enqueue([notification()]);
    await deliverer.drain(1000);
    const call = http.calls[0] as Call;
    expect(call.headers['webhook-id']).toBe('msg_abc');
    expect(call.headers['webhook-timestamp']).toBe(String(Math.floor(time.now() / 1000)));
    expect(call.headers['webhook-signature']).toMatch(/^v1,/);
    const verifier = new Webhook(SECRET);
    // verify() checks the timestamp against the real clock: pin it to "now"
    const ts = String(Math.floor(Date.now() / 1000));
    const resigned = verifier.sign('msg_abc', new Date(Number(ts) * 1000), call.body);
    expect(verifier.verify(call.body, { 'webhook-id': 'msg_abc', 'webhook-timestamp': ts, 'webhook-signature': resigned })).toMatchObject({ rule: 'SlotInactive', dedupKey: 'k1' });
    // and the header really is HMAC-SHA256 over id.timestamp.body with the secret
    expect(new Webhook(SECRET).sign('msg_abc', new Date(Number(call.headers['webhook-timestamp']) * 1000), call.body)).toBe(call.headers['webhook-signature']);
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 8).toString('base64')}`).verify(call.body, { 'webhook-id': 'msg_abc', 'webhook-timestamp': ts, 'webhook-signature': resigned })).toThrow();
  });

  it('no secret: no signature header', async () => {
    const { http, deliverer } = setup([200], { webhookSecret: undefined });
    deliverer.enqueue([notification()]);
    await deliverer.drain(1000);
    expect(http.calls[0]?.headers['webhook-signature']).toBeUndefined();
  });

  it('500 then 200: delivered on the second attempt, same id and dedup key', async () => {
    const { http, deliverer, events, time } = setup([500, 200]);
    deliverer.enqueue([notification()]);
    await deliverer.drain(1000);
    expect(http.calls).toHaveLength(2);
    expect(http.calls.map((c) => c.headers['webhook-id'])).toEqual(['msg_abc', 'msg_abc']);
    expect(http.calls.map((c) => JSON.parse(c.body).dedupKey)).toEqual(['k1', 'k1']);
    expect(time.sleeps).toEqual([750]); // equal jitter: 1000/2 + 0.5 × 1000/2
    expect(events.map((e) => e[0])).toEqual(['watchdog.delivery-retry', 'watchdog.delivered']);
  });

  it('retries timeouts and 429, honouring Retry-After over a shorter backoff', async () => {
    const { http, deliverer, time } = setup(['error', { status: 429, retryAfter: '30' }, 503, 200]);
    deliverer.enqueue([notification()]);
    await deliverer.drain(1000);
    expect(http.calls).toHaveLength(4);
    expect(time.sleeps).toEqual([750, 30_000, 3_000]);
  });

  it('caps Retry-After at maxRetryAfterMs', async () => {
    const { deliverer, time } = setup([{ status: 503, retryAfter: '99999' }, 200], { delivery: { maxRetryAfterMs: 5_000 } });
    deliverer.enqueue([notification()]);
    await deliverer.drain(1000);
    expect(time.sleeps).toEqual([5_000]);
  });

  it('does not retry other 4xx, and says why', async () => {
    const { http, deliverer, events } = setup([404, 200]);
    deliverer.enqueue([notification()]);
    await deliverer.drain(1000);
    expect(http.calls).toHaveLength(1);
    expect(events[0]?.[0]).toBe('watchdog.delivery-failed');
    expect(String(events[0]?.[1].message)).toMatch(/HTTP 404.*not retried/);
  });

  it('gives up after maxAttempts and carries on with the next notification in order', async () => {
    const { http, deliverer, events } = setup([500, 500, 500, 200], { delivery: { maxAttempts: 3 } });
    deliverer.enqueue([notification({ id: 'a' }), notification({ id: 'b' })]);
    await deliverer.drain(1000);
    expect(http.calls.map((c) => c.headers['webhook-id'])).toEqual(['a', 'a', 'a', 'b']);
    expect(events.filter((e) => e[0] === 'watchdog.delivery-failed')).toHaveLength(1);
  });

  it('enqueue never waits for a receiver', () => {
    const config = wdConfig({ webhookUrl: 'http://127.0.0.1:1/hook' });
    const post: HttpPost = () => new Promise(() => {}); // never answers
    const deliverer = createDeliverer({ receivers: createReceivers(config), settings: config.delivery, post });
    const started = Date.now();
    deliverer.enqueue([notification({ id: 'a' }), notification({ id: 'b' })]);
    expect(Date.now() - started).toBeLessThan(50);
    expect(deliverer.pending()).toEqual({ webhook: 2 });
    deliverer.stop();
  });

  it('posts Slack and Alertmanager formats to their URLs', async () => {
    const config = wdConfig({ slackWebhookSecretUrl: 'https://hooks.slack.test/services/T/B/secret', alertmanagerUrl: 'http://127.0.0.1:9093/' });
    const http = scripted([200, 200]);
    const deliverer = createDeliverer({ receivers: createReceivers(config), settings: config.delivery, post: http.post });
    deliverer.enqueue([notification()]);
    await deliverer.drain(1000);
    const urls = http.calls.map((c) => c.url).sort();
    expect(urls).toEqual(['http://127.0.0.1:9093/api/v2/alerts', 'https://hooks.slack.test/services/T/B/secret']);
    const am = JSON.parse(http.calls.find((c) => c.url.includes('api/v2'))?.body ?? '[]');
    expect(am[0].labels).toMatchObject({ alertname: 'SlotInactive', slot_name: 's1', severity: 'warning', dedup_key: 'k1' });
  });
});

describe('delivery helpers', () => {
  it('parseRetryAfter reads seconds and HTTP dates', () => {
    expect(parseRetryAfter('120', 0)).toBe(120_000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', Date.parse('2026-01-01T00:00:00Z'))).toBe(30_000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:00 GMT', Date.parse('2026-01-01T00:01:00Z'))).toBe(0);
    expect(parseRetryAfter(undefined, 0)).toBeUndefined();
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
  });
  it('retriable statuses: 408, 429, 5xx only', () => {
    expect([200, 400, 401, 404, 408, 429, 500, 502, 503].filter(isRetriableStatus)).toEqual([408, 429, 500, 502, 503]);
  });
  it('safeTarget hides paths and credentials (Slack URLs carry a token)', () => {
    expect(safeTarget('https://user:pw@hooks.slack.com/services/T1/B2/XYZ?x=1')).toBe('https://hooks.slack.com');
  });
});
