/**
 * Delivery of notifications to the receivers: one in-order queue per receiver, drained in the
 * background so a slow or failing receiver never blocks polling. Timeouts, network errors, 429 and 5xx
 * are retried with the project's backoff + jitter (src/retry), waiting at least a receiver's
 * Retry-After; other 4xx are not retried. A notification is given up only after `maxAttempts` /
 * `ceilingMs`, or when the queue overflows `maxQueue` — each logged and counted, never silently.
 */
import axios from 'axios';
import { Webhook } from 'standardwebhooks';
import { OutboxError, isOutboxError } from '../errors';
import { urlOrigin } from '../log/redact';
import { retry, sleepUnlessAborted } from '../retry';
import type { AlertNotification } from './alert-engine';
import { alertmanagerPayload, genericPayload, slackPayload } from './payloads';
import type { WatchdogConfig } from './slot-lag-rules';

export type ReceiverKind = 'webhook' | 'slack' | 'alertmanager';

export interface HttpResponse {
  status: number;
  headers: Record<string, string | undefined>;
}

/** POSTs `body`; resolves with any HTTP status, rejects only when no response came (timeout, refused). */
export type HttpPost = (url: string, body: string, headers: Record<string, string>, timeoutMs: number) => Promise<HttpResponse>;

export type DeliveryEventName = 'watchdog.delivered' | 'watchdog.delivery-retry' | 'watchdog.delivery-failed' | 'watchdog.delivery-dropped';
export type DeliveryListener = (name: DeliveryEventName, data: Record<string, unknown>) => void;

export const axiosPost: HttpPost = async (url, body, headers, timeoutMs) => {
  const response = await axios.post(url, body, { headers, timeout: timeoutMs, validateStatus: () => true, transformRequest: [(d: unknown) => d], responseType: 'text', maxRedirects: 0 });
  const flat: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(response.headers ?? {})) flat[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v === undefined || v === null ? undefined : String(v);
  return { status: response.status, headers: flat };
};

/** Retry-After (RFC 9110): delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const date = Date.parse(v);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

/** Retry on no response, 408, 429 and 5xx; never on other 4xx (a wrong URL or payload stays wrong). */
export function isRetriableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** Where a URL points, without credentials, path tokens or query: safe to log (Slack URLs embed a token). */
export const safeTarget = urlOrigin;

export interface Receiver {
  kind: ReceiverKind;
  url: string;
  /** Body and headers of one attempt (signatures carry the attempt's timestamp). */
  render(batch: AlertNotification[], nowMs: number): { body: string; headers: Record<string, string> };
}

export function createReceivers(config: WatchdogConfig): Receiver[] {
  const receivers: Receiver[] = [];
  const json = { 'content-type': 'application/json', 'user-agent': 'outbox-router-watchdog' };
  if (config.webhookUrl) {
    const signer = config.webhookSecret ? new Webhook(config.webhookSecret) : null;
    receivers.push({
      kind: 'webhook',
      url: config.webhookUrl,
      render(batch, nowMs) {
        const n = batch[0] as AlertNotification;
        const body = JSON.stringify(genericPayload(n, config.runbookUrl));
        const headers: Record<string, string> = { ...json, 'webhook-id': n.id, 'webhook-timestamp': String(Math.floor(nowMs / 1000)) };
        if (signer) headers['webhook-signature'] = signer.sign(n.id, new Date(nowMs), body);
        return { body, headers };
      },
    });
  }
  if (config.slackWebhookSecretUrl) {
    receivers.push({ kind: 'slack', url: config.slackWebhookSecretUrl, render: (batch) => ({ body: JSON.stringify(slackPayload(batch[0] as AlertNotification, config.runbookUrl)), headers: json }) });
  }
  if (config.alertmanagerUrl) {
    const url = `${config.alertmanagerUrl.replace(/\/+$/, '')}/api/v2/alerts`;
    receivers.push({ kind: 'alertmanager', url, render: (batch) => ({ body: JSON.stringify(alertmanagerPayload(batch, config.runbookUrl, 4 * config.alertmanagerResendMs)), headers: json }) });
  }
  return receivers;
}

export interface DelivererOptions {
  receivers: Receiver[];
  settings: WatchdogConfig['delivery'];
  post?: HttpPost;
  onEvent?: DeliveryListener;
  now?: () => number;
  random?: () => number;
  /** Waits; resolves false when stopping. Default: a real, abortable sleep. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<boolean>;
}

export interface Deliverer {
  /** Queues notifications for every receiver; returns at once. Alertmanager gets them as one post. */
  enqueue(notifications: AlertNotification[], only?: ReceiverKind): void;
  /** Notifications waiting (or being retried) per receiver. */
  pending(): Record<string, number>;
  /** Resolves when every queue is empty, or after `timeoutMs`. */
  drain(timeoutMs: number): Promise<boolean>;
  /** Stops retrying (what is still queued is logged as not delivered). */
  stop(): void;
}

interface Item {
  batch: AlertNotification[];
}

export function createDeliverer(options: DelivererOptions): Deliverer {
  const post = options.post ?? axiosPost;
  const now = options.now ?? Date.now;
  const settings = options.settings;
  const wait = options.sleep ?? sleepUnlessAborted;
  const abort = new AbortController();
  const emit: DeliveryListener = (name, data) => {
    try {
      options.onEvent?.(name, data);
    } catch {
      // a listener never breaks delivery
    }
  };

  const queues = options.receivers.map((receiver) => ({ receiver, items: [] as Item[], running: false, idle: [] as Array<() => void> }));

  const attemptOnce = async (receiver: Receiver, batch: AlertNotification[]): Promise<void> => {
    const { body, headers } = receiver.render(batch, now());
    let response: HttpResponse;
    try {
      response = await post(receiver.url, body, headers, settings.requestTimeoutMs);
    } catch (error) {
      const code = (error as { code?: string }).code ?? (error as Error).message;
      throw new OutboxError('WATCHDOG_DELIVERY_FAILED', `The ${receiver.kind} receiver at ${safeTarget(receiver.url)} did not answer (${code}). Check that it runs and is reachable from the watchdog; the notification is retried.`, {
        retriable: true,
        details: { receiver: receiver.kind, code },
      });
    }
    if (response.status >= 200 && response.status < 300) return;
    const retriable = isRetriableStatus(response.status);
    throw new OutboxError(
      'WATCHDOG_DELIVERY_FAILED',
      `The ${receiver.kind} receiver at ${safeTarget(receiver.url)} answered HTTP ${response.status}. ` +
        (retriable ? 'It is retried with backoff.' : 'It is not retried: check the URL (watchdog.*Url settings) and what the receiver expects (docs/watchdog.md).'),
      { retriable, details: { receiver: receiver.kind, status: response.status, retryAfterMs: parseRetryAfter(response.headers['retry-after'], now()) } },
    );
  };

  const deliver = async (receiver: Receiver, item: Item): Promise<void> => {
    let retryAfterMs = 0;
    const ids = item.batch.map((n) => n.id);
    try {
      await retry(
        async () => {
          if (abort.signal.aborted) throw new OutboxError('WATCHDOG_DELIVERY_FAILED', 'The watchdog stopped before this notification was delivered.', { retriable: false });
          return attemptOnce(receiver, item.batch);
        },
        {
          attempts: settings.maxAttempts,
          initialDelayMs: settings.initialDelayMs,
          maxDelayMs: settings.maxDelayMs,
          ceilingMs: settings.ceilingMs,
          now,
          random: options.random,
          shouldRetry: (error) => isOutboxError(error) && error.retriable && !abort.signal.aborted,
          onRetry: (error, attempt, delayMs) => {
            const after = isOutboxError(error) ? (error.details.retryAfterMs as number | undefined) : undefined;
            retryAfterMs = Math.min(after ?? 0, settings.maxRetryAfterMs);
            emit('watchdog.delivery-retry', { receiver: receiver.kind, ids, attempt, delayMs: Math.max(delayMs, retryAfterMs), message: (error as Error).message });
          },
          sleep: async (ms) => {
            const full = await wait(Math.max(ms, retryAfterMs), abort.signal);
            retryAfterMs = 0;
            if (!full) throw new OutboxError('WATCHDOG_DELIVERY_FAILED', 'The watchdog stopped while retrying this notification.', { retriable: false });
          },
        },
      );
      emit('watchdog.delivered', { receiver: receiver.kind, ids, rules: item.batch.map((n) => n.rule) });
    } catch (error) {
      emit('watchdog.delivery-failed', { receiver: receiver.kind, ids, message: (error as Error).message, code: isOutboxError(error) ? error.code : undefined });
    }
  };

  const run = async (q: (typeof queues)[number]) => {
    if (q.running) return;
    q.running = true;
    try {
      while (q.items.length > 0) {
        const item = q.items[0] as Item;
        await deliver(q.receiver, item);
        q.items.shift();
      }
    } finally {
      q.running = false;
      for (const resolve of q.idle.splice(0)) resolve();
    }
  };

  return {
    enqueue(notifications, only) {
      if (notifications.length === 0) return;
      for (const q of queues) {
        if (only && q.receiver.kind !== only) continue;
        const items = q.receiver.kind === 'alertmanager' ? [{ batch: notifications }] : notifications.map((n) => ({ batch: [n] }));
        q.items.push(...items);
        while (q.items.length > settings.maxQueue) {
          // never the head: it may be mid-delivery
          const [dropped] = q.items.splice(1, 1);
          emit('watchdog.delivery-dropped', { receiver: q.receiver.kind, ids: dropped?.batch.map((n) => n.id), message: `queue full (${settings.maxQueue}): oldest waiting notification given up` });
        }
        void run(q);
      }
    },
    pending: () => Object.fromEntries(queues.map((q) => [q.receiver.kind, q.items.length])),
    async drain(timeoutMs) {
      const busy = queues.filter((q) => q.running || q.items.length > 0);
      if (busy.length === 0) return true;
      let timer: NodeJS.Timeout | undefined;
      const done = Promise.all(busy.map((q) => new Promise<void>((resolve) => q.idle.push(resolve)))).then(() => true);
      const timeout = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      const result = await Promise.race([done, timeout]);
      clearTimeout(timer);
      return result;
    },
    stop() {
      abort.abort();
    },
  };
}
