import type { NamedOutbox, OutboxConfig } from '../config';
import type { Logger } from '../log';
import { createServiceSet, runService, type ServiceMember } from '../service';

export interface OutboxSetOptions<M extends ServiceMember> {
  /** `watchdog` or `relay`: names the process in its log lines. */
  what: string;
  /** One member for one outbox, logging through `log` (which names the outbox). */
  create(config: OutboxConfig, log: Logger): M;
  /** Where /metrics and the probes listen: the first outbox's settings. */
  http(config: OutboxConfig): { host: string; port: number };
  stopping: string;
  /** What is logged of each member once stopped. */
  stoppedFields(member: M): unknown;
}

/**
 * One service per outbox in this process (docs/multi-outbox.md), run as one: a member that cannot start
 * is retried while the others run (createServiceSet), one HTTP listener serves every member's metrics,
 * each series labelled `outbox`.
 */
export async function runOutboxSet<M extends ServiceMember>(outboxes: readonly NamedOutbox[], log: Logger, options: OutboxSetOptions<M>): Promise<void> {
  const members = new Map<string, M>();
  const set = createServiceSet({
    logger: log,
    label: 'outbox',
    members: outboxes.map(({ name, config }) => ({
      name,
      create: () => {
        const member = options.create(config, log.child({ outbox: name }));
        members.set(name, member);
        return member;
      },
    })),
  });
  const { host, port } = options.http((outboxes[0] as NamedOutbox).config);
  await runService({
    service: set.service,
    logger: log,
    metrics: { host, port, registry: set.registry },
    health: () => set.health(),
    started: (url) => ({ fields: { outboxes: outboxes.map((o) => o.name), metrics: url }, message: `${options.what} started for ${outboxes.length} outboxes` }),
    stopping: options.stopping,
    stopped: () => ({ fields: { members: Object.fromEntries([...members].map(([n, m]) => [n, options.stoppedFields(m)])) }, message: `${options.what} stopped` }),
  });
}
