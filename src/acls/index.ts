/**
 * `outbox kafka:acls`: the Kafka ACLs each part of the pipeline needs, from the config (docs/kafka-acls.md).
 * Computes and prints; applyKafkaAcls creates a plan on the brokers (the secure local stack uses it).
 */
export {
  ACL_COMPONENTS,
  ACL_OPERATIONS,
  ACL_PATTERN_TYPES,
  ACL_RESOURCE_TYPES,
  CLUSTER_RESOURCE_NAME,
  CONSOLE_GROUP_PREFIX,
  REPLAY_GROUP_PREFIX,
  heartbeatTopic,
  planKafkaAcls,
  routerGroupId,
  type AclComponent,
  type AclEntry,
  type AclOperation,
  type AclPatternType,
  type AclPlan,
  type AclReport,
  type AclResourceType,
  type PlanOptions,
} from './plan';
export { applyKafkaAcls, toKafkajsAcl } from './apply';
export { ACL_FORMATS, renderAclsJson, renderKafkaAcls, renderStrimziUsers, shellWord, strimziUserName, type AclFormat, type KafkaAclsOptions, type StrimziUserOptions } from './render';
