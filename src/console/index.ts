export { createConsole, type Console, type ConsoleOptions } from './create-console';
export { MASKED, maskRules, maskValue, type MaskRules } from './mask';
export { createConsoleAuth, SESSION_COOKIE, sessionCookieName, type ConsoleAuth, type Operator } from './auth';
export { parseActionRequest, type ActionName, type ActionRequest } from './actions';
export { SERIES, type SeriesName, type Snapshot } from './sampler';
export type { LetterView, LetterState, PayloadView } from './dead-letters';
export type { AuditEntry } from './audit';
