export { provision, type ProvisionOptions, type ProvisionReport } from './provision';
export { preflightProblems, readPreflightFacts, type PreflightFacts } from './preflight';
export { loadMigrations, outboxCleanupFunctionName, sqlValues } from './sql-files';
export { ensureOutboxPolicies, outboxPolicies } from './row-policy';
