import { Socket } from 'node:net';
import axios from 'axios';
import { ConfigResourceTypes, type Admin, type Kafka } from 'kafkajs';
import type { OutboxConfig } from '../config';
import { createConnectClient } from '../connector';
import { traceHead } from '../connector/wait';
import { clientConfig, withClient } from '../db';
import { STACK_HOST, STACK_PORTS } from '../config/local-stack';
import { sampleSlots, type SlotRow as SampledSlot } from '../watchdog/slot-query';
import { readStandbySlots } from '../watchdog/failover-query';
import { standbyReadiness } from '../watchdog/failover-rules';
import { standbyConnection } from '../watchdog/standby';
import { redactUrl } from '../log/redact';
import { maskUrl } from './format';
import type { ConnectorData, DlqData, GroupInfo, GroupsData, SlotRow, SlotsData, StackData, StandbyData, TopicLag, WatchdogData } from './types';

/** Each section reads one system, read-only, and either returns its data or throws (collect.ts turns that into `ok: false`). */

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

function pointsAt(host: string, port: number, expected: number): boolean {
  return LOCAL_HOSTS.has(host.toLowerCase()) && port === expected;
}

/** True if any configured address is one of the native stack's ports on this machine. */
export function targetsLocalStack(config: OutboxConfig): boolean {
  const db = pointsAt(config.database.host, config.database.port, STACK_PORTS.postgres);
  const kafka = config.kafka.brokers.some((b) => {
    const at = b.lastIndexOf(':');
    return at > 0 && pointsAt(b.slice(0, at), Number(b.slice(at + 1)), STACK_PORTS.kafka);
  });
  let connect = false;
  try {
    const url = new URL(config.connect.url);
    connect = pointsAt(url.hostname, Number(url.port), STACK_PORTS.connect);
  } catch {
    // an unparseable URL is not the local stack
  }
  return db || kafka || connect;
}

// ---------------------------------------------------------------- stack

/** Resolves true when something accepts a TCP connection at host:port within `timeoutMs`. */
export function portAnswers(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.connect(port, host);
  });
}

/** An HTTP service is ready when a GET of `path` answers 2xx; the detail is what it said or why not. */
async function httpReady(url: string, timeoutMs: number): Promise<{ ready: boolean; detail: string }> {
  try {
    const response = await axios.get<unknown>(url, { timeout: timeoutMs, validateStatus: () => true });
    const ok = response.status >= 200 && response.status < 300;
    return { ready: ok, detail: `GET ${new URL(url).pathname} answered HTTP ${response.status}` };
  } catch (error) {
    return { ready: false, detail: (error as { code?: string })?.code ?? (error as Error).message };
  }
}

/**
 * The local stack's services as seen from here: each port of the local profile (src/config/local-stack.ts)
 * probed, whichever way the stack was started (`npm run stack:up` or docker compose). Processes, pids and
 * memory are the development harness's business (`npm run stack:status`); the library does not read them.
 */
export async function readStack(config: OutboxConfig, timeoutMs = 2_000): Promise<StackData> {
  if (!targetsLocalStack(config)) {
    return { local: false, note: 'not the local stack: the configuration points at other hosts', services: [] };
  }
  const base = `http://${STACK_HOST}`;
  const services = await Promise.all(
    (
      [
        { name: 'postgres', ports: [STACK_PORTS.postgres] },
        { name: 'kafka', ports: [STACK_PORTS.kafka] },
        { name: 'registry', ports: [STACK_PORTS.registry], http: `${base}:${STACK_PORTS.registry}/apis/registry/v3/system/info` },
        { name: 'connect', ports: [STACK_PORTS.connect], http: `${base}:${STACK_PORTS.connect}/` },
      ] as Array<{ name: string; ports: number[]; http?: string }>
    ).map(async ({ name, ports, http }) => {
      const running = await portAnswers(STACK_HOST, ports[0] as number, timeoutMs);
      const probe = running && http ? await httpReady(http, timeoutMs) : { ready: running, detail: running ? 'accepts connections' : 'nothing listens' };
      return { name, running, ready: probe.ready, pid: null, ports, rssBytes: 0, detail: probe.detail };
    }),
  );
  if (!services.some((s) => s.running)) {
    return {
      local: false,
      note: `not the local stack: nothing answers on its ports at ${STACK_HOST} (start it with \`npm run stack:up\` or docker compose)`,
      services: [],
    };
  }
  return { local: true, note: null, services };
}

// ---------------------------------------------------------------- connector

export async function readConnector(config: OutboxConfig, timeoutMs: number): Promise<ConnectorData> {
  // One attempt, bounded by the section timeout: status must answer fast rather than retry a rebalance.
  const client = createConnectClient({ ...config.connect, requestTimeoutMs: timeoutMs }, { retry: { attempts: 1 } });
  const name = config.connector.name;
  // GET /connectors also proves a Connect worker answers: anything else's 404 must not read as "not deployed".
  const [info, stored, listed] = await Promise.all([client.status(name), client.getConfig(name), client.list()]);
  const firstLine = (state: string, trace: string | undefined) => (state === 'FAILED' ? (traceHead(trace, 1) ?? null) : null);
  return {
    name,
    url: config.connect.url,
    deployed: info !== undefined || stored !== undefined || listed.includes(name),
    state: info?.connector.state ?? null,
    worker: info?.connector.worker_id ?? null,
    trace: info ? firstLine(info.connector.state, info.connector.trace) : null,
    tasks: (info?.tasks ?? [])
      .map((t) => ({ id: t.id, state: t.state, worker: t.worker_id, trace: firstLine(t.state, t.trace) }))
      .sort((a, b) => a.id - b.id),
    slotName: stored?.['slot.name'] ?? null,
  };
}

// ---------------------------------------------------------------- slots

/**
 * Every logical slot, and the configured one whatever its type (it comes first), from the one slot
 * sample (src/watchdog/slot-query.ts, per server version 13–18).
 */
export async function readSlots(config: OutboxConfig, timeoutMs: number): Promise<SlotsData> {
  const slotName = config.connector.slotName;
  const settings = clientConfig(config.database, {
    application_name: 'outbox-router status',
    connectionTimeoutMillis: timeoutMs,
    statement_timeout: timeoutMs,
  });
  const [sample, standbyRead] = await Promise.all([withClient(settings, (client) => sampleSlots(client)), readStandby(config, timeoutMs)]);
  const slots: SlotRow[] = sample.slots
    .filter((s) => s.slotType === 'logical' || s.slotName === slotName)
    .sort((a, b) => Number(b.slotName === slotName) - Number(a.slotName === slotName) || a.slotName.localeCompare(b.slotName))
    .map((s) => ({
      name: s.slotName,
      configured: s.slotName === slotName,
      plugin: s.plugin,
      database: s.database,
      active: s.active,
      activePid: s.activePid,
      walStatus: s.walStatus,
      retainedBytes: s.retainedBytes,
      confirmedLagBytes: s.flushLagBytes,
      safeWalSizeBytes: s.safeWalSize,
    }));
  return { slotName, found: slots.some((s) => s.configured), slots, standby: standbyRead(sample.slots) };
}

/**
 * The standby's slots (watchdog.standby.databaseUrl), read beside the primary's; judged against them once
 * both are in. A standby that cannot be read is reported in the section, never fails it.
 */
async function readStandby(config: OutboxConfig, timeoutMs: number): Promise<(primary: readonly SampledSlot[]) => StandbyData> {
  const standby = standbyConnection(config);
  if (!standby) return () => ({ configured: false });
  const { target } = standby;
  try {
    const settings = clientConfig(standby.database, { application_name: 'outbox-router status', connectionTimeoutMillis: timeoutMs, statement_timeout: timeoutMs });
    const sample = await withClient(settings, (client) => readStandbySlots(client));
    return (primary) => ({ configured: true, target, inRecovery: sample.inRecovery, slots: standbyReadiness(primary, sample) });
  } catch (error) {
    return () => ({ configured: true, target, error: redactUrl((error as Error).message), slots: [] });
  }
}

// ---------------------------------------------------------------- Kafka

/** Runs `fn` over `items`, at most `limit` at a time. */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * One admin connection shared by the Kafka sections; built and connected on first use (a bad TLS file then
 * fails those sections only), closed by the caller.
 */
export function sharedAdmin(kafka: () => Kafka): { get(): Promise<Admin>; close(): Promise<void> } {
  let connecting: Promise<Admin> | undefined;
  let connected: Admin | undefined;
  return {
    get() {
      connecting ??= (async () => {
        const admin = kafka().admin();
        await admin.connect();
        connected = admin;
        return admin;
      })();
      return connecting;
    },
    async close() {
      if (connected) {
        await connected.disconnect().catch(() => {});
      } else if (connecting) {
        // Still connecting after its sections timed out: disconnect when (if) it gets there, without waiting.
        connecting.then((admin) => admin.disconnect()).catch(() => {});
      }
    },
  };
}

type Watermarks = Map<number, { low: number; high: number }>;

async function watermarks(admin: Admin, topic: string): Promise<Watermarks> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return new Map(offsets.map((o) => [o.partition, { low: Number(o.low), high: Number(o.high) }]));
}

/** Lag of one topic: partitions without a commit (or committed below the low watermark) count from the low watermark. */
export function topicLag(topic: string, committed: ReadonlyMap<number, number>, marks: Watermarks): TopicLag {
  const partitions = [...marks.entries()]
    .sort(([a], [b]) => a - b)
    .map(([partition, { low, high }]) => {
      const c = committed.get(partition);
      const from = c === undefined || c < 0 ? low : Math.max(c, low);
      return { partition, committed: c === undefined || c < 0 ? null : c, low, high, lag: Math.max(0, high - from) };
    });
  return { topic, lag: partitions.reduce((sum, p) => sum + p.lag, 0), partitions };
}

export async function readGroups(admin: Admin, requested: readonly string[], topicPattern: RegExp): Promise<GroupsData> {
  const { groups: listed } = await admin.listGroups();
  // protocolType '' is a group with committed offsets only (e.g. reset by kafka-consumer-groups): listed too.
  const discovered = listed
    .filter((g) => (g.protocolType === 'consumer' || g.protocolType === '') && !requested.includes(g.groupId))
    .map((g) => g.groupId);
  const candidates = [...requested, ...discovered];
  const committed = await mapLimit(candidates, 8, async (groupId) => ({ groupId, topics: await admin.fetchOffsets({ groupId }) }));

  const kept = committed
    .map(({ groupId, topics }) => {
      const isRequested = requested.includes(groupId);
      const relevant = topics.filter((t) => isRequested || topicPattern.test(t.topic));
      return { groupId, requested: isRequested, topics: relevant };
    })
    .filter((g) => g.requested || g.topics.length > 0);
  if (kept.length === 0) return { topicPattern: topicPattern.source, groups: [] };

  const described = await admin.describeGroups(kept.map((g) => g.groupId));
  const byId = new Map(described.groups.map((d) => [d.groupId, d]));
  const topicNames = [...new Set(kept.flatMap((g) => g.topics.map((t) => t.topic)))];
  const marks = new Map<string, Watermarks | undefined>();
  await mapLimit(topicNames, 8, async (topic) => {
    // A topic deleted since the group committed to it has no watermarks any more: left out.
    marks.set(topic, await watermarks(admin, topic).catch(() => undefined));
  });

  const groups: GroupInfo[] = kept.map((g) => {
    const d = byId.get(g.groupId);
    const topics = g.topics
      .flatMap((t) => {
        const m = marks.get(t.topic);
        if (!m) return [];
        return [topicLag(t.topic, new Map(t.partitions.map((p) => [p.partition, Number(p.offset)])), m)];
      })
      .sort((a, b) => a.topic.localeCompare(b.topic));
    return {
      groupId: g.groupId,
      requested: g.requested,
      state: d?.state ?? 'Unknown',
      members: d?.members.length ?? 0,
      clients: (d?.members ?? []).map((m) => `${m.clientId}@${m.clientHost.replace(/^\//, '')}`).sort(),
      totalLag: topics.reduce((sum, t) => sum + t.lag, 0),
      topics,
    };
  });
  groups.sort((a, b) => Number(b.requested) - Number(a.requested) || a.groupId.localeCompare(b.groupId));
  return { topicPattern: topicPattern.source, groups };
}

export async function readDlq(admin: Admin, dlqPattern: RegExp): Promise<DlqData> {
  const topics = (await admin.listTopics()).filter((t) => dlqPattern.test(t)).sort();
  const [rows, retention] = await Promise.all([
    mapLimit(topics, 8, async (topic) => {
      const m = await watermarks(admin, topic);
      const depth = [...m.values()].reduce((sum, { low, high }) => sum + Math.max(0, high - low), 0);
      return { topic, partitions: m.size, depth };
    }),
    retentionOf(admin, topics),
  ]);
  return {
    topicPattern: dlqPattern.source,
    total: rows.reduce((sum, r) => sum + r.depth, 0),
    topics: rows.map((r) => ({ ...r, retentionMs: retention.get(r.topic) ?? null })),
  };
}

/** retention.ms of each topic, in one DescribeConfigs request (the broker's default when the topic sets none). */
async function retentionOf(admin: Admin, topics: readonly string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (topics.length === 0) return out;
  const { resources } = await admin.describeConfigs({
    includeSynonyms: false,
    resources: topics.map((name) => ({ type: ConfigResourceTypes.TOPIC, name, configNames: ['retention.ms'] })),
  });
  for (const r of resources) {
    const value = r.configEntries.find((e) => e.configName === 'retention.ms')?.configValue;
    if (r.errorCode === 0 && value !== undefined && value !== null && /^-?\d+$/.test(value)) out.set(r.resourceName, Number(value));
  }
  return out;
}

// ---------------------------------------------------------------- watchdog

const MAX_BODY_CHARS = 4_000;

/** Names of alerts in state "firing", whatever shape the body has: {a: 'firing'}, [{name, state: 'firing'}], {firing: [...]}. */
export function firingAlerts(body: unknown): string[] {
  const out = new Set<string>();
  const nameOf = (node: Record<string, unknown>): string | undefined => {
    for (const key of ['name', 'alert', 'alertname', 'id']) if (typeof node[key] === 'string') return node[key] as string;
    return undefined;
  };
  const visit = (node: unknown, key: string | undefined, depth: number): void => {
    if (depth > 8 || node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const item of node) visit(item, key, depth + 1);
      return;
    }
    const record = node as Record<string, unknown>;
    for (const [k, v] of Object.entries(record)) {
      const isStateKey = ['state', 'status', 'alertstate'].includes(k.toLowerCase());
      if (typeof v === 'string' && v.toLowerCase() === 'firing') {
        const name = isStateKey ? (nameOf(record) ?? key) : k;
        if (name) out.add(name);
      } else if (k.toLowerCase() === 'firing' && v === true) {
        const name = nameOf(record) ?? key;
        if (name) out.add(name);
      } else if (k.toLowerCase() === 'firing' && Array.isArray(v)) {
        for (const item of v) {
          const name = typeof item === 'string' ? item : item && typeof item === 'object' ? nameOf(item as Record<string, unknown>) : undefined;
          if (name) out.add(name);
        }
      } else {
        visit(v, k, depth + 1);
      }
    }
  };
  visit(body, undefined, 0);
  return [...out].sort();
}

/** Base URL of the watchdog: a trailing /metrics or /healthz is dropped, so either may be passed. */
export function watchdogBase(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/(metrics|healthz)$/, '');
}

export async function readWatchdog(url: string, timeoutMs: number): Promise<WatchdogData> {
  const base = watchdogBase(url);
  try {
    const response = await axios.get<string>(`${base}/healthz`, {
      timeout: timeoutMs,
      validateStatus: () => true,
      responseType: 'text',
      transformResponse: (data: unknown) => data,
      maxContentLength: 1024 * 1024,
    });
    const text = typeof response.data === 'string' ? response.data : String(response.data ?? '');
    let health: unknown;
    try {
      health = JSON.parse(text);
    } catch {
      health = text.length > MAX_BODY_CHARS ? `${text.slice(0, MAX_BODY_CHARS)}…` : text;
    }
    return { url: maskUrl(base), running: true, httpStatus: response.status, health, firing: firingAlerts(health) };
  } catch (error) {
    const code = (error as { code?: string })?.code;
    if (code === 'ECONNREFUSED') return { url: maskUrl(base), running: false, httpStatus: null, health: null, firing: [] };
    throw error;
  }
}
