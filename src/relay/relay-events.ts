import type { EventLevels } from '../service';
import type { RelayEventName } from './types';

/** The level each relay event is logged at. */
export const RELAY_EVENT_LEVELS: EventLevels<RelayEventName> = {
  'relay.started': 'info',
  'relay.stopped': 'info',
  'relay.batch': (data) => (data.claimed === 0 ? 'trace' : 'debug'),
  'relay.publish-failed': 'warn',
  'relay.db-error': 'warn',
  'relay.lag': 'trace',
  'relay.cleanup': (data) => (typeof data.deleted === 'number' && data.deleted > 0 ? 'info' : 'debug'),
  'relay.listen': (data) => (data.state === 'listening' ? 'info' : 'warn'),
};
