import type { Registry } from 'prom-client';
import type { Logger } from '../log';
import { createLifecycle } from './lifecycle';
import type { RunnableService } from './run-service';

/** One member of a service set: a named service (one outbox's watchdog or relay) and its own metrics. */
export interface ServiceMember {
  service: RunnableService;
  registry: Registry;
  health(): { healthy: boolean; details: Record<string, unknown> };
}

export interface ServiceSetOptions {
  /** Each member by name; `create` is called again to retry a member whose start failed. */
  members: ReadonlyArray<{ name: string; create(): ServiceMember }>;
  logger: Logger;
  /** The label naming the member in every metric (`outbox`). */
  label: string;
  /** How long after a failed start a member is created and started again (default 30 s). */
  retryStartMs?: number;
}

export interface ServiceSet {
  service: RunnableService;
  /** Every member's metrics, each series labelled with its member's name. */
  registry: Pick<Registry, 'metrics' | 'contentType'>;
  health(): { healthy: boolean; details: Record<string, unknown> };
  /** The members running now, by name (a member whose start failed is absent until a retry starts it). */
  running(): ReadonlyMap<string, ServiceMember>;
}

/**
 * Several services in one process (`outbox watchdog` and `outbox relay` over several outboxes), each on its
 * own: a member whose start fails (its database unreachable, say) is logged and retried every
 * `retryStartMs` while the others run; the set fails to start only when every member does. Ready when
 * every member is; its /metrics is the members' merged, each series with `label` = the member's name.
 */
export function createServiceSet(options: ServiceSetOptions): ServiceSet {
  const { logger: log, label } = options;
  const retryMs = options.retryStartMs ?? 30_000;
  const running = new Map<string, ServiceMember>();
  const failures = new Map<string, string>();
  const timers = new Set<NodeJS.Timeout>();
  let stopping = false;

  const startMember = async (name: string, create: () => ServiceMember): Promise<void> => {
    let member: ServiceMember | undefined;
    try {
      member = create();
      member.registry.setDefaultLabels({ [label]: name });
      await member.service.start();
      if (stopping) return void (await member.service.stop());
      running.set(name, member);
      if (failures.delete(name)) log.info({ event: 'service-set.member-started', [label]: name }, `${label} ${name}: started after an earlier failure`);
    } catch (error) {
      const message = (error as Error).message;
      failures.set(name, message);
      log.error({ event: 'service-set.member-failed', [label]: name, error: message, retryInMs: retryMs }, `${label} ${name} did not start; the others run on, and it is tried again in ${Math.round(retryMs / 1000)} s`);
      await member?.service.stop().catch(() => {});
      if (stopping) return;
      const timer = setTimeout(() => {
        timers.delete(timer);
        void startMember(name, create);
      }, retryMs);
      timers.add(timer);
    }
  };

  const lifecycle = createLifecycle('service-set', {
    start: async () => {
      await Promise.all(options.members.map((m) => startMember(m.name, m.create)));
      if (running.size === 0) {
        for (const timer of timers) clearTimeout(timer);
        throw new Error(`none of ${options.members.length} ${label}es started: ${[...failures].map(([n, e]) => `${n}: ${e}`).join('; ')}`);
      }
    },
    stop: async () => {
      stopping = true;
      for (const timer of timers) clearTimeout(timer);
      await Promise.all([...running.values()].map((m) => m.service.stop()));
    },
  });

  const service: RunnableService = {
    start: () => lifecycle.start(),
    stop: () => lifecycle.stop(),
    status: () => lifecycle.status(),
    ready: () => failures.size === 0 && [...running.values()].every((m) => m.service.ready()),
    readyDetails: () => Object.fromEntries(options.members.map(({ name }) => [name, running.get(name)?.service.ready() ? 'ready' : (failures.get(name) ?? 'not ready')])),
  };
  return {
    service,
    registry: { contentType: 'text/plain; version=0.0.4; charset=utf-8', metrics: async () => mergeExpositions(await Promise.all([...running.values()].map((m) => m.registry.metrics()))) },
    health: () => {
      const each = Object.fromEntries(options.members.map(({ name }) => [name, running.get(name)?.health() ?? { healthy: false, details: { error: failures.get(name) ?? 'not started' } }]));
      return { healthy: Object.values(each).every((h) => h.healthy), details: { [`${label}es`]: each } };
    },
    running: () => running,
  };
}

/** The process's own metrics: the same in every member's registry, so kept once. */
const PROCESS_FAMILY = /^(process_|nodejs_)/;

/**
 * Prometheus text expositions merged into one: a metric family appears once (its HELP and TYPE lines once,
 * every member's samples under them); the process's families (`process_*`, `nodejs_*`) from the first only.
 */
export function mergeExpositions(texts: readonly string[]): string {
  const families = new Map<string, { head: string[]; samples: string[] }>();
  texts.forEach((text, index) => {
    let current: { head: string[]; samples: string[] } | undefined;
    let skip = false;
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const meta = /^# (HELP|TYPE) (\S+)/.exec(line);
      if (meta) {
        const name = meta[2] as string;
        skip = index > 0 && PROCESS_FAMILY.test(name);
        current = families.get(name);
        if (!current) families.set(name, (current = { head: [], samples: [] }));
        if (index === 0 || current.head.length < 2) {
          if (!current.head.some((h) => h.startsWith(`# ${meta[1] as string} `))) current.head.push(line);
        }
        continue;
      }
      if (!skip && current) current.samples.push(line);
    }
  });
  return `${[...families.values()].map((f) => [...f.head, ...f.samples].join('\n')).join('\n\n')}\n`;
}
