export { provision, type ProvisionOptions, type ProvisionReport } from './provision';
export { preflightProblems, readPreflightFacts, type PreflightFacts } from './preflight';
export { inboxPartitionNames, loadMigrations, outboxCleanupFunctionName, parkedTableName, sqlValues } from './sql-files';
export { ensureOutboxPolicies, outboxPolicies } from './row-policy';
