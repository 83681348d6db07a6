/**
 * The configuration's names for the one redaction (src/log/redact.ts): `redactConfig` is a copy of a
 * config safe to print or log, `withoutUserinfo` removes credentials from URLs in a text.
 */
export { SECRET_KEY, redactSecrets as redactConfig, redactUrl as withoutUserinfo } from '../log/redact';
