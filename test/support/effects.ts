import type { Pool } from 'pg';
import type { EventHandler, RoutedEvent } from '../../src/router';

/** The effects table the pipeline tests' handlers write to, in the inbox transaction. */
export const createEffectsTable = (pool: Pool) =>
  pool.query('CREATE TABLE effects (seq bigserial PRIMARY KEY, message_id uuid NOT NULL, aggregate_id text NOT NULL, reason text NOT NULL, tenant text, traceparent text)');

/**
 * A handler that records each event in `effects` (its reason from `reasonOf`, default `payload.reason`)
 * and in `seen`, so a test can compare both with what was written.
 */
export function recordingHandler(seen: RoutedEvent[], reasonOf: (event: RoutedEvent) => string = (e) => (e.payload as { reason: string }).reason): EventHandler {
  return async (event, { tx }) => {
    seen.push(event);
    await tx.query('INSERT INTO effects (message_id, aggregate_id, reason, tenant, traceparent) VALUES ($1, $2, $3, $4, $5)', [
      event.id,
      event.aggregateId,
      reasonOf(event),
      event.headers.tenant ?? null,
      event.traceparent ?? null,
    ]);
  };
}
