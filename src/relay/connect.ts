import { Partitioners } from 'kafkajs';
import { Client, type Pool } from 'pg';
import { clientConfig, connectionError, pgCode } from '../db';
import { OutboxError } from '../errors';
import { createKafka, kafkaCredentialFailure } from '../kafka';
import { createListener } from './listen';
import { messageOf, query, type RelayRuntime } from './runtime';
import { NOTIFY_TRIGGER } from './wake';

/** The outbox table exists with the relay's columns. */
export async function checkTable(rt: RelayRuntime): Promise<void> {
  const { config } = rt;
  try {
    await query(rt, rt.pool as Pool, rt.sql.check);
  } catch (error) {
    const code = pgCode(error);
    if (code === '42P01' || code === '42703' || code === '3F000') {
      throw new OutboxError(
        'RELAY_TABLE_INVALID',
        `The outbox table ${config.outbox.schema}.${config.outbox.table} is missing or lacks the relay's columns (${(error as Error).message}). ` +
          'Run `outbox db:provision` against this database, or set outbox.schema / outbox.table (OUTBOX_SCHEMA / OUTBOX_TABLE) to the provisioned table.',
        { cause: error, details: { code } },
      );
    }
    if (code === undefined) throw connectionError(clientConfig(config.database), error);
    throw error;
  }
}

/** Refuses to run beside an instance with another shard count: their shards would overlap and break per-aggregate order. */
export async function joinShardGroup(rt: RelayRuntime): Promise<void> {
  const { config, settings } = rt;
  // Its own session, outside the pool: the shared lock lives as long as this connection.
  const client = new Client(clientConfig(config.database, { application_name: 'outbox-relay:member' }));
  client.on('error', (error) => rt.logger.warn({ event: 'relay.db-idle-error', error: error.message }, 'relay.db-idle-error'));
  try {
    await client.connect();
  } catch (error) {
    throw connectionError(clientConfig(config.database), error);
  }
  rt.member = client;
  await query(rt, client, rt.sql.join, [rt.ns.members, settings.workers]);
  const { rows } = await query<{ workers: string }>(rt, client, rt.sql.members, [rt.ns.members]);
  const others = rows.map((r) => Number(r.workers)).filter((n) => n !== settings.workers);
  if (others.length > 0) {
    throw new OutboxError(
      'RELAY_WORKERS_MISMATCH',
      `Another relay on ${config.outbox.schema}.${config.outbox.table} runs with ${others.join(', ')} worker(s), this one with ${settings.workers}. ` +
        'The worker count is the shard count: instances with different counts would publish one aggregate from two shards, out of order. ' +
        'Start every instance with the same --workers (relay.workers / OUTBOX_RELAY_WORKERS), or stop the others first.',
      { details: { workers: settings.workers, others } },
    );
  }
}

export async function connectKafka(rt: RelayRuntime): Promise<void> {
  const { config } = rt;
  rt.kafka = rt.options.kafka ?? createKafka(config, { role: 'relay', logger: rt.logger, retries: 5 });
  // Not idempotent: kafkajs's idempotent producer needs endless retries (a send that never fails blocks
  // shutdown and the per-key backoff), and with bounded ones it may reuse sequence numbers for other
  // records. acks=all plus marking after the ack gives at-least-once; the router's inbox dedups.
  rt.producer = rt.kafka.producer({ allowAutoTopicCreation: false, createPartitioner: Partitioners.DefaultPartitioner });
  rt.admin = rt.kafka.admin();
  try {
    await rt.producer.connect();
    await rt.admin.connect();
  } catch (error) {
    const refused = kafkaCredentialFailure(error, config.kafka, 'connecting the relay');
    if (refused) throw refused;
    throw new OutboxError(
      'RELAY_KAFKA_UNAVAILABLE',
      `Cannot connect to Kafka at ${config.kafka.brokers.join(', ')}: ${messageOf(error)}. ` +
        'Check that the brokers run and are reachable (KAFKA_BROKERS or kafka.brokers in --config; `npm run stack:up` for the local stack).',
      { retriable: true, cause: error, details: { brokers: [...config.kafka.brokers] } },
    );
  }
}

/** The LISTEN session (relay.notify), and whether db:provision made the trigger that feeds it. */
export async function listen(rt: RelayRuntime): Promise<void> {
  const { config, channel } = rt;
  if (!rt.settings.notify) return;
  const { rows } = await query<{ present: boolean }>(rt, rt.pool as Pool, rt.sql.notifyTrigger, [config.outbox.schema, config.outbox.table, NOTIFY_TRIGGER]);
  if (!rows[0]?.present) {
    const table = `${config.outbox.schema}.${config.outbox.table}`;
    rt.events.emit('relay.listen', { state: 'no-trigger', channel, hint: `relay.notify is on but ${table} has no notify trigger: run db:provision with relay.notify (OUTBOX_RELAY_NOTIFY=true). Until then new rows wait up to pollIntervalMs.` });
  }
  rt.listener = createListener({
    client: clientConfig(config.database, { application_name: 'outbox-relay:listen' }),
    channel,
    backoff: rt.backoff,
    random: rt.random,
    onWake: () => {
      rt.stats.wakes++;
      rt.wake.wakeAll();
    },
    onState: (state, data) => rt.events.emit('relay.listen', { state, channel, ...data }),
  });
  await rt.listener.start();
}
