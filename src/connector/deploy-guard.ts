/**
 * The guard rails of one deploy (src/connector/deploy.ts): what its steps share, the slot and offset
 * checks before a write and on an unchanged config, what `force` overrides, and the refusal each gives.
 */
import type { OutboxConfig } from '../config';
import { OutboxError } from '../errors';
import type { Logger } from '../log';
import { FAILOVER_SLOT_VERSION, type ConnectorConfig } from './build-config';
import type { ConnectClient, ConnectorStatusInfo } from './connect-client';
import type { ServerFacts } from './database';
import { promoted, type GuardFinding, type GuardInput } from './slot-guard';
import { connectorFailure } from './wait';

export type DeployStep = 'validate' | 'prerequisites' | 'diff' | 'guard' | 'write' | 'wait';

export function refuse(name: string, findings: GuardFinding[], created: boolean, server?: ServerFacts): OutboxError {
  // The slot lost in a failover gets its own code: the recovery (relay or re-snapshot) differs from a slot dropped by hand only in the cause.
  const failover = promoted(server?.timeline) && findings.some((f) => f.code === 'offset-without-slot');
  return new OutboxError(
    failover ? 'SLOT_MISSING_AFTER_FAILOVER' : 'CONNECTOR_UNSAFE',
    `Refusing to deploy connector ${name}${created ? ' (the connector just created to read its offsets was removed again)' : ''}; nothing was deployed:\n` +
      `${findings.map((f) => `  - ${f.message}`).join('\n')}\nResolve it as described, or deploy with --force (force: true) if you accept the consequence.`,
    { details: { findings: findings.map((f) => f.code) } },
  );
}

/** connector.slotFailover=on asks for what a server before 17 cannot give (Debezium then makes a plain slot). */
export function oldServerWarning(config: OutboxConfig, server: ServerFacts): string | undefined {
  if (config.connector.slotFailover !== 'on' || server.versionNum >= FAILOVER_SLOT_VERSION) return undefined;
  return (
    `connector.slotFailover is on, but the server is PostgreSQL ${Math.floor(server.versionNum / 10_000)}: failover slots need 17+, so Debezium makes a plain slot, ` +
    'which a failover leaves behind (docs/connector.md, "Failover slots"). Upgrade to 17+ for a slot that survives a failover, or set connector.slotFailover=auto to silence this.'
  );
}

/** What the steps of one deploy share. */
export interface Deployment {
  config: OutboxConfig;
  client: ConnectClient;
  desired: ConnectorConfig;
  name: string;
  force: boolean;
  log?: Logger;
  progress: (step: DeployStep, detail: string) => void;
  /** Refusals that `force` overrode (reported in the result). */
  overridden: string[];
  /** Forced past an offset the slot cannot serve: reset it, so Debezium streams from the slot instead of failing. */
  resetOffsets: boolean;
  guard: (input: Omit<GuardInput, 'slotName' | 'database' | 'slot' | 'preSlotRows' | 'timeline'>) => GuardFinding[];
  server: ServerFacts;
  storedOffset: () => Promise<Record<string, unknown> | undefined>;
}

/** The guard rails for a connector Connect already has, with the offsets it stored. */
async function checkExisting(d: Deployment, stored: Record<string, string>): Promise<GuardFinding[]> {
  return d.guard({ connector: stored['slot.name'] === d.desired['slot.name'] ? 'same-slot' : 'other-slot', offset: await d.storedOffset() });
}

/** Nothing is written, so nothing is refused; a slot/offset problem is still worth saying. */
export async function checkUnchanged(d: Deployment, current: Record<string, string>): Promise<{ status: ConnectorStatusInfo | undefined; warnings: string[] }> {
  const findings = await checkExisting(d, current);
  // A lost slot is not a warning about the past: the connector cannot stream from it at all, stopped or running.
  // Nor can it from a slot that is gone under its stored offset (dropped, or left behind by a failover without
  // failover slots: SLOT_MISSING_AFTER_FAILOVER): its task fails, and a redeploy must say why, not only that.
  const lost = findings.filter((f) => f.code === 'slot-lost' || f.code === 'offset-without-slot');
  if (lost.length > 0 && !d.force) throw refuse(d.name, lost, false, d.server);
  const warnings = findings.map((f) => f.message);
  for (const w of warnings) d.log?.warn({ step: 'guard' }, w);
  d.progress('diff', 'unchanged: nothing to write');
  const status = await d.client.status(d.name);
  // Nothing to write is not "all is well": a FAILED task stays FAILED until restarted.
  const failed = status && connectorFailure(d.name, status);
  if (failed) {
    throw new OutboxError('CONNECTOR_FAILED', `${failed.message}\nThe config is unchanged; once the cause is fixed, run \`outbox connector:restart\`.`, { details: failed.details });
  }
  return { status, warnings };
}

/** False when there are refusals and no `force`; else records what `force` overrode and whether offsets must be reset. */
export function accept(d: Deployment, findings: GuardFinding[]): boolean {
  if (findings.length > 0 && !d.force) return false;
  d.overridden.push(...findings.map((f) => f.message));
  d.resetOffsets = findings.some((f) => f.code === 'offset-without-slot' || f.code === 'slot-ahead-of-offset');
  d.progress('guard', findings.length ? `${findings.length} refusal(s) overridden by force${d.resetOffsets ? '; stored offsets will be reset' : ''}` : 'slot and stored offsets agree');
  return true;
}

/** The guard rails before anything is written: throws the refusals `force` does not override. */
export async function guardBeforeWrite(d: Deployment, current: Record<string, string> | undefined, dryRun: boolean): Promise<void> {
  if (current || dryRun) {
    // A connector that does not exist yet shows no offsets; a real deploy looks again once it is created STOPPED.
    const findings = current ? await checkExisting(d, current) : d.guard({ connector: 'absent', offset: undefined });
    if (!accept(d, findings)) throw refuse(d.name, findings, false, d.server);
  }
  if (!current && !d.force && !dryRun) {
    // Known before anything is created: refuse without the create-STOPPED-and-remove-again round trip.
    const early = d.guard({ connector: 'absent', offset: undefined }).filter((f) => f.code === 'rows-before-slot' || f.code === 'topic-compacted');
    if (early.length > 0) throw refuse(d.name, early, false, d.server);
  }
}
