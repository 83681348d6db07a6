export { createStack, SERVICE_NAMES, serviceNames, type Stack, type ServiceName, type ServiceStatus, type StepEvent } from './stack';
export { resolveStackConfig, type StackConfig, type StackOptions } from './config';
export { probeConnect, probeKafka, probePostgres, probeRegistry, type Probe } from './probes';
export * from './settings';
