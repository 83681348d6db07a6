/** The chaos run's options, profile and report, shared by the orchestrator (run-chaos.ts), the writers and the CLI. */
import type { Logger } from 'outbox-router/log';

export type Pipeline = 'cdc' | 'relay';
export type FaultKind = 'kill-connect' | 'kill-relay' | 'restart-kafka' | 'restart-postgres' | 'kill-router';

export interface ChaosProfile {
  events: number;
  aggregates: number;
  writers: number;
  /** Events per second the writers aim at, all together. */
  rate: number;
  rollbackShare: number;
}

export interface FaultRecord {
  kind: FaultKind;
  /** Committed events when it was injected. */
  atCommitted: number;
  /** Until an event committed after the fault was handled. */
  recoveryMs: number | null;
  notes: string[];
}

export interface ChaosReport {
  pipeline: Pipeline;
  /** CDC with connector.exactlyOnce (KIP-618 transactions); false for the relay. */
  exactlyOnce: boolean;
  profile: ChaosProfile;
  events: { attempted: number; committed: number; rolledBack: number; notCommittedOnError: number; ambiguousCommits: number };
  faults: FaultRecord[];
  lost: number;
  phantom: number;
  doubleApplied: number;
  orderViolations: number;
  /** Records on the topic beyond one per committed event: the at-least-once window. */
  duplicatesDelivered: number;
  recordsOnTopic: number;
  slotLagBytes: number | null;
  commitToHandledMs: Record<string, number>;
  seconds: number;
  ok: boolean;
  /** FAILED connector tasks the watchdog's supervisor restarted (CDC): each is a finding about Debezium. */
  connectorRestarts: string[];
}

export interface ChaosOptions {
  pipeline: Pipeline;
  /** Where the router's and relay's logs go (default reports/). */
  logDir?: string;
  /** Only these fault kinds of the plan (default: all). */
  only?: readonly FaultKind[];
  profile: ChaosProfile;
  /** CDC: deploy the connector with connector.exactlyOnce (the Connect worker needs exactly.once.source.support=enabled). */
  exactlyOnce?: boolean;
  log: Logger;
  progress?: (line: string) => void;
}
