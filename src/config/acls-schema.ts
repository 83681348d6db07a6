import { z } from 'zod';

/**
 * Settings of `outbox kafka:acls` (src/acls, docs/kafka-acls.md): who each part of the pipeline is to
 * the brokers, and the names of the Kafka Connect worker's own resources, which live in the worker's
 * properties rather than in this config. Part of the root schema as `acls`. Every other name the ACLs
 * carry (topics, groups, transactional ids) is derived from the rest of the config.
 */

/** `User:<name>`, as kafka-acls.sh and the authorizer take it (`User:` is what SASL/SCRAM and mTLS principals carry). */
const principal = z.string().regex(/^[A-Za-z][A-Za-z0-9]*:\S+$/, 'a Kafka principal such as User:outbox-router (type, colon, name; no spaces)');
/** Kafka topic and group names: the characters Kafka accepts in a topic name. */
const kafkaName = z.string().regex(/^[A-Za-z0-9._-]{1,249}$/, 'letters, digits, ".", "_" and "-", at most 249 characters (a Kafka topic or group name)');

export const aclsSchema = z
  .object({
    /** The Kafka Connect workers: their group, their config/offset/status topics. */
    connectPrincipal: principal.default('User:outbox-connect'),
    /**
     * The connector's producer, when the workers allow a per-connector principal
     * (`connector.client.config.override.policy` with `producer.override.sasl.jaas.config`). Unset: the
     * worker's principal, which is what a worker without overrides uses for its source tasks.
     */
    connectorPrincipal: principal.optional(),
    /** `outbox router` (one consumer: router.groupId, else router.consumer). */
    routerPrincipal: principal.default('User:outbox-router'),
    /** `outbox dlq:replay`: reads dead letters, writes them back to their routed topics. */
    replayPrincipal: principal.default('User:outbox-dlq-replay'),
    /** `outbox relay`, the polling relay. */
    relayPrincipal: principal.default('User:outbox-relay'),
    /** `outbox status` and `connector:deploy`'s topic check: describe only. */
    statusPrincipal: principal.default('User:outbox-status'),
    /** `outbox console`: its status sampling, its dead-letter reader and (unless console.readOnly) its replay action. */
    consolePrincipal: principal.default('User:outbox-console'),
    /** The workers' `group.id` (the local stack's worker uses outbox-connect). */
    connectGroupId: kafkaName.default('outbox-connect'),
    /** The workers' `config.storage.topic`, `offset.storage.topic` and `status.storage.topic` (the local stack's names). */
    connectConfigTopic: kafkaName.default('_connect-configs'),
    connectOffsetTopic: kafkaName.default('_connect-offsets'),
    connectStatusTopic: kafkaName.default('_connect-status'),
    /**
     * The aggregate types whose topics the ACLs name one by one (LITERAL), instead of by the routed
     * topics' prefix. Needed when connector.topicReplacement starts with `${routedByValue}` (no fixed prefix).
     */
    aggregateTypes: z.array(z.string().min(1)).default([]),
    /**
     * Also grant IdempotentWrite on the cluster to the transactional producers (Connect with
     * connector.exactlyOnce). Brokers since Kafka 2.8 (KIP-679) need it no more: off by default.
     */
    idempotentWriteAcl: z.boolean().default(false),
  })
  .strict();

export type AclsConfig = z.output<typeof aclsSchema>;
