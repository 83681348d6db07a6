import type { Producer } from 'kafkajs';
import type { Pool } from 'pg';
import { qualified } from '../db';
import { kafkaCredentialFailure } from '../kafka';
import type { DlqTopics } from './dlq-topics';
import type { RouterDeps } from './record-context';
import type { RouterRuntime } from './runtime';

/** Everything a record needs that outlives a batch: built once, when start() has the pool. */
export function routerDeps(rt: RouterRuntime, db: Pool, codec: RouterDeps['codec'], dlqs: DlqTopics): RouterDeps {
  const { settings, options } = rt;
  return {
    handlers: options.handlers,
    codec,
    pool: db,
    inboxTable: qualified(options.config.outbox.schema, options.config.outbox.inboxTable),
    consumer: settings.consumer,
    maxAttempts: settings.maxAttempts,
    backoff: settings.backoff,
    infrastructureBackoff: settings.infrastructureBackoff,
    aggregateTypeOf: rt.aggregateTypeOf,
    dlqTopicFor: rt.dlqTopicFor,
    sendDeadLetter: async (topic, message, source) => {
      // Never auto-created with broker defaults (a finite retention would delete the only copy).
      try {
        await dlqs.ensure(new Map([[topic, source]]));
        await (rt.producer as Producer).send({ topic, acks: -1, messages: [message] });
      } catch (error) {
        // A missing ACL or a refused credential is waited out (retriable), never taken for a letter the DLQ refuses.
        throw kafkaCredentialFailure(error, options.config.kafka, `writing a dead letter to ${topic}`) ?? error;
      }
    },
    stats: rt.stats,
    emit: (name, data) => rt.events.emit(name, data),
    random: options.random,
    policyFor: (aggregateType) => settings.policies[aggregateType] ?? settings.defaultPolicy,
    unknownEventType: settings.unknownEventType,
    unknownEventTypes: settings.unknownEventTypes,
    handlerTimeoutMs: settings.handlerTimeoutMs || undefined,
    payloadSchemas: options.payloadSchemas,
    unknownSchemaIdWaitMs: settings.unknownSchemaIdWaitMs,
    unknownSchemaIds: new Map(),
    envelope: settings.envelope,
  };
}
