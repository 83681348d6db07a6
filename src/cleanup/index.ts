export { runOutboxCleanup, type OutboxCleanupOptions, type OutboxCleanupRun } from './outbox-cleanup';
