export {
  describeRefusal,
  registerCleanupSlot,
  runBelowFloorCleanup,
  runOutboxCleanup,
  type BelowFloorOptions,
  type BelowFloorRun,
  type CleanupRefusal,
  type OutboxCleanupOptions,
  type OutboxCleanupRun,
} from './outbox-cleanup';
