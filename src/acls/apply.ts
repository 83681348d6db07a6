import { AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes, type Admin, type AclEntry as KafkajsAcl } from 'kafkajs';
import type { AclEntry, AclOperation, AclPlan } from './plan';

const OPERATIONS: Record<AclOperation, AclOperationTypes> = {
  Read: AclOperationTypes.READ,
  Write: AclOperationTypes.WRITE,
  Create: AclOperationTypes.CREATE,
  Delete: AclOperationTypes.DELETE,
  Describe: AclOperationTypes.DESCRIBE,
  DescribeConfigs: AclOperationTypes.DESCRIBE_CONFIGS,
  IdempotentWrite: AclOperationTypes.IDEMPOTENT_WRITE,
};

/** One planned entry as the Kafka protocol's CreateAcls takes it. */
export function toKafkajsAcl(entry: AclEntry): KafkajsAcl {
  return {
    resourceType: AclResourceTypes[entry.resourceType],
    resourceName: entry.resourceName,
    resourcePatternType: ResourcePatternTypes[entry.patternType],
    principal: entry.principal,
    host: entry.host,
    operation: OPERATIONS[entry.operation],
    permissionType: AclPermissionTypes.ALLOW,
  };
}

/**
 * Creates the plan's ACLs on the brokers through an admin client whose principal may alter ACLs (a super
 * user, or Alter on the cluster). Idempotent: Kafka keeps one binding however often it is created.
 * Returns how many bindings were sent.
 */
export async function applyKafkaAcls(admin: Admin, plan: AclPlan): Promise<number> {
  const acl = plan.map(toKafkajsAcl);
  if (acl.length > 0) await admin.createAcls({ acl });
  return acl.length;
}
