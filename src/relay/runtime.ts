import type { Admin, Kafka, Producer } from 'kafkajs';
import type { Client, Pool, PoolClient } from 'pg';
import type { TopicFor } from '../codec';
import type { OutboxConfig } from '../config';
import type { RelayConfig } from '../config/relay-schema';
import type { Logger } from '../log';
import type { BackoffSettings } from '../retry';
import type { Emitter } from '../service';
import type { KeyBlocks } from './key-blocks';
import type { Listener } from './listen';
import type { PublishHealth } from './publish-health';
import type { RelayOptions } from './create-relay';
import type { RelaySql } from './sql';
import type { RelayEventName, RelayStats } from './types';
import type { WakeSignal } from './wake';

/** What the parts of one relay share while it runs (create-relay.ts wires them). */
export interface RelayRuntime {
  readonly options: RelayOptions;
  readonly config: OutboxConfig;
  readonly settings: Readonly<RelayConfig>;
  readonly logger: Logger;
  readonly events: Emitter<RelayEventName>;
  readonly stats: RelayStats;
  readonly topicFor: TopicFor;
  readonly sql: RelaySql;
  readonly ns: { shards: string; members: string };
  readonly backoff: BackoffSettings;
  readonly random: () => number;
  readonly wake: WakeSignal;
  readonly channel: string;
  /** Each worker's blocked keys, by shard. */
  readonly blocks: KeyBlocks[];
  /** Shards whose last poll failed (a database error, or every publish of the batch failed). */
  readonly failing: Set<number>;
  /** Since when nothing publishes (/healthz). */
  readonly publishHealth: PublishHealth;
  pool?: Pool;
  member?: Client;
  kafka?: Kafka;
  producer?: Producer;
  admin?: Admin;
  listener?: Listener;
}

/** A statement, counted in stats.queries (the relay's database load). */
export async function query<R extends object = Record<string, unknown>>(rt: RelayRuntime, client: Pool | PoolClient | Client, text: string, values?: unknown[]) {
  rt.stats.queries++;
  return client.query<R>(text, values);
}

export const messageOf = (error: unknown): string => (error as Error)?.message ?? String(error);
