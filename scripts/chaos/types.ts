/** The chaos run's options, profile and report, shared by the orchestrator (run-chaos.ts), the writers and the CLI. */
import type { Logger } from 'outbox-router/log';
import type { GrowthVerdict, TableSample } from '../soak/sampling';

export type Pipeline = 'cdc' | 'relay';
/** kill-*: SIGKILL (Kafka: the broker JVM; PostgreSQL: the postmaster, so crash recovery runs); restart-*: a graceful stop. */
export type FaultKind =
  | 'kill-connect'
  | 'kill-relay'
  | 'restart-kafka'
  | 'kill-kafka'
  | 'restart-postgres'
  | 'kill-postgres'
  | 'kill-router'
  // The cluster profile's: SIGKILL of one broker (the routed topic's leader, the active controller) or of
  // the worker running the task; the primary killed and the standby promoted.
  | 'kill-kafka-leader'
  | 'kill-kafka-controller'
  | 'kill-connect-worker'
  | 'failover-postgres';
export type ProfileName = 'full' | 'ci' | 'soak';

export interface ChaosProfile {
  events: number;
  aggregates: number;
  /** Aggregates that a share of the transactions (`hotShare`) goes to: concurrent writers meet on their row locks. */
  hotAggregates: number;
  hotShare: number;
  writers: number;
  /** Events per second the writers aim at, all together. */
  rate: number;
  rollbackShare: number;
  /** Each transaction waits up to this long (random) before taking its aggregate's row lock, and again before COMMIT. */
  maxDelayMs: number;
  /** Router instances in one consumer group, and lanes per partition. */
  routers: number;
  lanes: number;
  /** Partitions of the routed topic. */
  partitions: number;
  /** Share of events whose handler throws on its first two attempts (the router retries them). */
  flakyShare: number;
  /** One event in this many is poison: its handler throws until the run fixes it (dead-lettered, its key parked). 0: none. */
  poisonEvery: number;
  /** Fix the poison events and run dlq:replay this often while writing (s); 0: only at the end. */
  replayEverySeconds: number;
  /** Sample sizes and RSS each minute and judge growth (the soak profile). */
  soak: boolean;
  /** Write for at least this long (the soak profile); 0: until `events` and the fault plan are done. */
  minutes: number;
}

export interface FaultRecord {
  kind: FaultKind;
  /** Committed events when it was injected. */
  atCommitted: number;
  /** Until an event committed after the fault was handled. */
  recoveryMs: number | null;
  notes: string[];
}

/** The handler failures the run caused on purpose, and how the DLQ replay ended. */
export interface HandlerFailureReport {
  /** Committed events whose handler threw on its first two attempts. */
  flakyEvents: number;
  /** Committed poison events (dead-lettered until fixed), and the aggregates they parked. */
  poisonEvents: number;
  parkedAggregates: number;
  /** Committed events of parked aggregates from their first poison event on: dead-lettered, applied by the replay. */
  eventsBehindPoison: number;
  /** dlq:replay runs, events they re-published, keys still parked after the last one. */
  replays: number;
  replayed: number;
  /** Keys the first replay at the end left parked (a second and third run follow), and those the last one left. */
  stillParkedAfterFirstReplay: string[];
  stillParked: string[];
  /** Parked rows of the run's consumer after the end (must be 0). */
  parkedRowsAtEnd: number;
}

export interface SoakSample extends TableSample {
  minute: number;
  committed: number;
  handled: number;
  /** RSS (MB) of each Node process of the pipeline: router-a, router-b, relay. */
  rssMb: Record<string, number>;
}

export interface SoakReport {
  minutes: number;
  samples: SoakSample[];
  verdicts: GrowthVerdict[];
}

export interface ChaosReport {
  pipeline: Pipeline;
  /** The stack's profile: one node of each, or the cluster (three brokers, two workers, a primary and its standby). */
  topology: 'single' | 'cluster';
  /** CDC with connector.exactlyOnce (KIP-618 transactions); false for the relay. */
  exactlyOnce: boolean;
  profile: ChaosProfile;
  events: {
    attempted: number;
    committed: number;
    rolledBack: number;
    notCommittedOnError: number;
    ambiguousCommits: number;
    /** Committed transactions that began before the one committed just ahead of them on their aggregate. */
    commitOrderInversions: number;
  };
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
  handlerFailures: HandlerFailureReport;
  /** Records on the topic that dlq:replay re-published (not counted as duplicates). */
  replayedRecordsOnTopic: number;
  soak?: SoakReport;
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
