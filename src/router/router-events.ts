import type { EventLevels } from '../service';
import type { RouterEventName } from './types';

/** The level each router event is logged at (the rest: debug). */
export const ROUTER_EVENT_LEVELS: EventLevels<RouterEventName> = {
  'router.dead-letter': 'warn',
  'router.wait': 'warn',
  'router.wait-ended': 'info',
  'router.blocked': 'warn',
  'router.chunk-split': 'warn',
  'router.retry': 'info',
  'router.unblocked': 'info',
  'router.skipped': 'info',
  'router.replay-skipped': 'info',
  'router.topics-changed': 'info',
  'router.group-join': 'info',
  'router.revoked': 'info',
  'router.housekeeping-failed': 'warn',
  'router.inbox-prune-blocked': 'error',
  'router.inbox-prune-resumed': 'info',
  'router.inbox-partitions': 'info',
};
