export { createRelay, type Relay, type RelayOptions } from './create-relay';
export { createRelayMetrics, type RelayMetrics } from './metrics';
export type { RelayStats, RelayEventName, RelayEventListener } from './types';
export type { RelayConfig } from '../config/relay-schema';
export { recordFor, groupByKey, chunkByBytes, recordBytes, type OutboxRow, type RelayRecord, type KeyGroup } from './records';
export { buildRelaySql, lockNamespaces, ROW_BYTES_EXPRESSION, SHARD_EXPRESSION, type RelaySql } from './sql';
export { publishBatch, type Sender, type PublishOutcome } from './publish';
export { runCleanup, type CleanupOptions } from '../db';
export { createKeyBlocks, type KeyBlocks } from './key-blocks';
